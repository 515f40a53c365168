"""Orchestrate's object-cache node routes, served alone on loopback for image tests and the
image benchmark: the real routes (``add_object_cache_routes``) over a real
:class:`ObjectCache` on SQLite, in a thread of their own. The node token is not checked
(the REST gateway's middleware does that in Orchestrate); user routes answer no one; errors
are answered as the gateway answers them (their google.rpc.Status and HTTP status)."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from fuzzball_core.api.rest import status_response
from fuzzball_core.errors import FuzzballError, Unauthenticated
from fuzzball_core.orchestrate.object_cache_routes import add_object_cache_routes
from fuzzball_core.service.views import Principal
from fuzzball_core.store.database import connect, migrate, session_factory
from fuzzball_core.store.object_cache import ObjectCache


@dataclass
class _Service:
    object_cache: ObjectCache | None
    node_token: str = ""


def _nobody(request: web.Request) -> Principal:
    raise Unauthenticated("this stand-in serves nodes only")


@web.middleware
async def _errors(request: web.Request, handler: Any) -> web.StreamResponse:
    try:
        return await handler(request)
    except FuzzballError as exc:
        return status_response(exc)


class ObjectCacheServer:
    """The node-objects routes at :attr:`url`, their content under ``directory``."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        engine = connect(f"sqlite:///{directory / 'store.db'}")
        migrate(engine)
        self.cache = ObjectCache(session_factory(engine), directory / "object-cache")
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(ready,), daemon=True)
        self._thread.start()
        ready.wait(30)
        self.url = f"http://127.0.0.1:{self._port}"

    def _serve(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application(client_max_size=0, middlewares=[_errors])
        add_object_cache_routes(app, "/v3", _Service(self.cache), _nobody)
        self._runner = web.AppRunner(app, access_log=None)
        self._loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        self._loop.run_until_complete(site.start())
        self._port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        ready.set()
        self._loop.run_forever()

    def close(self) -> None:
        """Stop serving."""
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
