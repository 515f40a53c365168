"""The REST gateway served from a thread of its own, beside the process's main loop.

Orchestrate's engine runs its passes on the process's main event loop (the *home* loop),
and each pass holds that loop for up to its budget (100-200 ms on a busy cluster). A REST
request served on the same loop waits out every pass it meets; :class:`GatewayThread` serves
the gateway from a thread with an event loop of its own instead, so the reads that need only
the store (the workflow and node lists, a workflow, events, logs) are answered during a
pass: Python hands the GIL between threads every 5 ms.

What touches the home loop's memory (submissions, cancels, holds, the Web UI's pages and
the process's own routes) must still run there: :func:`home_loop_middleware` runs every
handler on the home loop (its body read ahead on the gateway's), except the handlers marked
:func:`any_thread`, which the gateway's loop serves itself. A handler is marked only when
everything it reaches reads the store or copies made on the home loop; one that streams a
request's body or writes its response as it goes must be marked too (a connection belongs
to the gateway's loop), and so must be thread-safe.

Without a gateway thread (tests' clients, Federate) the home loop is the serving loop and
the middleware passes every request straight to its handler.
"""

from __future__ import annotations

import asyncio
import ssl
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

from aiohttp import web

from fuzzball_core.api.form_body import FORM_TYPES, read_form_ahead
from fuzzball_core.api.http_errors import RestRunner

T = TypeVar("T")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

#: the attribute :func:`any_thread` sets on a handler
_ANY_THREAD = "_fuzzball_any_thread"


class HomeLoop:
    """Where the process's state lives: the loop handlers run on unless marked
    :func:`any_thread`; ``None`` while the gateway is served on that loop itself."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None

    def elsewhere(self) -> asyncio.AbstractEventLoop | None:
        """The home loop when the caller runs on another loop (the gateway's thread)."""
        loop = self.loop
        if loop is None or loop is asyncio.get_running_loop():
            return None
        return loop


HOME_LOOP = web.AppKey("home_loop", HomeLoop)


def any_thread(handler: T) -> T:
    """Mark ``handler`` as served on the gateway's own loop: it reads only the store and
    copies made on the home loop, and is safe in any thread."""
    setattr(handler, _ANY_THREAD, True)
    return handler


def served_anywhere(handler: object) -> bool:
    """Whether ``handler`` is marked :func:`any_thread`."""
    return getattr(handler, _ANY_THREAD, False)


async def on_loop(loop: asyncio.AbstractEventLoop, work: Awaitable[T]) -> T:
    """Await ``work`` run on ``loop`` (another thread's) from the running loop."""

    async def awaited() -> T:
        return await work

    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(awaited(), loop))


@web.middleware
async def home_loop_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Run ``handler`` on the home loop unless it is marked :func:`any_thread` or the
    request is served there already; the body is read first, on the loop that owns the
    connection."""
    home = request.app[HOME_LOOP].elsewhere()
    match = request.match_info
    if home is None or match.http_exception is not None or served_anywhere(match.handler):
        return await handler(request)  # no route, or a route served here
    if request.can_read_body:
        # read(), post() and json() keep what they read: the handler's own calls on the
        # home loop are answered from it without touching this loop's connection (a
        # malformed form's refusal is kept too, for the handler's read_form)
        if request.content_type in FORM_TYPES:
            await read_form_ahead(request)
        else:
            await request.read()
    return await on_loop(home, handler(request))


class GatewayThread:
    """Serves ``app`` on ``host:port`` from a thread with its own event loop; handlers not
    marked :func:`any_thread` run on the loop that calls :meth:`start` (the home loop)."""

    def __init__(
        self,
        app: web.Application,
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._app = app
        self._address = (host, port)
        self._ssl_context = ssl_context
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="rest-gateway", daemon=True
        )
        self._runner: RestRunner | None = None

    async def start(self) -> None:
        """Start the thread and listen; raises what listening raised (address in use)."""
        self._app[HOME_LOOP].loop = asyncio.get_running_loop()
        self._thread.start()
        try:
            await on_loop(self._loop, self._listen())
        except BaseException:
            await self._end_thread()
            raise

    async def _listen(self) -> None:
        runner = RestRunner(self._app)
        await runner.setup()
        self._runner = runner
        host, port = self._address
        await web.TCPSite(runner, host, port, ssl_context=self._ssl_context).start()

    async def stop(self) -> None:
        """Stop listening, finish the requests in flight (their handlers on the home loop
        still run: this awaits, it does not block), and end the thread; once is enough."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await on_loop(self._loop, runner.cleanup())
        await self._end_thread()

    async def _end_thread(self) -> None:
        if self._loop.is_closed():
            return  # stopped already
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            await asyncio.to_thread(self._thread.join)
        self._loop.close()
