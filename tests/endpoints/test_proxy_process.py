"""The endpoint proxy's own process (fuzzball_core/orchestrate/endpoint_worker.py and
``ProxyProcess`` in endpoint_proxy.py): decisions asked of Orchestrate over the channel and
kept only as long as it says, endpoints forgotten at once when Orchestrate moves them, a
revoked token's decisions forgotten before the revocation returns, refusals answered with
Orchestrate's error, pools' touches passed to the keeper, and the process started again when
it ends. A real child process and a real aiohttp service on
loopback; Orchestrate's decisions come from a stand-in that counts them."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from support.ports import free_port

from fuzzball_core.config import EndpointsConfig
from fuzzball_core.errors import NotFound, Unavailable
from fuzzball_core.orchestrate import endpoint_worker
from fuzzball_core.orchestrate.endpoint_directory import Upstream
from fuzzball_core.orchestrate.endpoint_forwarder import RequestHead
from fuzzball_core.orchestrate.endpoint_proxy import ProxyProcess
from fuzzball_core.orchestrate.endpoint_worker import Routing, WorkerGate


@dataclass
class _Keeper:
    touched: list[tuple[str, str, float]] = field(default_factory=list)

    def touch(self, workflow_id: str, stage_name: str, idle_timeout: float) -> None:
        self.touched.append((workflow_id, stage_name, idle_timeout))


@dataclass
class _Directory:
    on_forget: list[Callable[[str], None]] = field(default_factory=list)

    def forget(self, endpoint_id: str) -> None:
        for tell in self.on_forget:
            tell(endpoint_id)


class _Orchestrate:
    """Stands in for EndpointProxy.decide: endpoint ``known`` leads to ``url`` for tokens
    ``good`` and ``also-good``; each decision is kept ``keep`` seconds; ``asked`` counts
    them. ``forget_tokens`` is what EndpointProxy.forget_revoked does with a revocation."""

    def __init__(self, url: str, *, keep: float, pool: bool = False) -> None:
        self.config = EndpointsConfig(domain="endpoints.test")
        self.keeper = _Keeper()
        self.url = url
        self.keep = keep
        self.pool = pool
        self.asked: list[tuple[str, str]] = []
        self.on_forget_tokens: list[Callable[[list[str] | None], list[asyncio.Future[None]]]] = []

    async def forget_tokens(self, tokens: list[str] | None) -> None:
        """Tell the processes to forget ``tokens``' decisions; back once they all said so."""
        waits = [wait for tell in self.on_forget_tokens for wait in tell(tokens)]
        await asyncio.wait_for(asyncio.gather(*waits), timeout=5)

    async def decide(self, endpoint_id: str, token: str) -> tuple[Upstream, float]:
        self.asked.append((endpoint_id, token))
        if endpoint_id != "known":
            raise NotFound(f"endpoint {endpoint_id} not found")
        if token not in ("good", "also-good"):
            raise Unavailable("its service is not ready yet")
        upstream = Upstream("wf", "services.app", self.url, True, self.pool, 30.0)
        return upstream, time.monotonic() + self.keep


Scenario = Callable[[str, _Orchestrate, _Directory, ProxyProcess], Awaitable[None]]


def _run(scenario: Scenario, *, keep: float = 60.0, pool: bool = False) -> None:
    async def main() -> None:
        async def hello(request: web.Request) -> web.Response:
            return web.Response(text=f"hello {request.path_qs}")

        app = web.Application()
        app.router.add_get("/{tail:.*}", hello)
        runner = web.AppRunner(app)
        await runner.setup()
        service_port = free_port()
        await web.TCPSite(runner, "127.0.0.1", service_port).start()
        orchestrate = _Orchestrate(f"http://127.0.0.1:{service_port}", keep=keep, pool=pool)
        directory = _Directory()
        # two processes: each asks and is told to forget on its own channel
        process = ProxyProcess(orchestrate, directory, 2)  # type: ignore[arg-type]
        proxy_port = free_port()
        await process.start("127.0.0.1", proxy_port)
        try:
            await scenario(f"http://127.0.0.1:{proxy_port}", orchestrate, directory, process)
        finally:
            await process.close()
            await runner.cleanup()

    asyncio.run(main())


async def _get(
    url: str, token: str = "good", session: aiohttp.ClientSession | None = None
) -> tuple[int, str]:
    """A GET through the proxy; on ``session``'s kept connection when given (one
    connection: one of the proxy's processes, whose kept decisions the test looks at)."""
    headers = {"FB-Authorization": f"Bearer {token}"}
    if session is None:
        async with aiohttp.ClientSession() as own:
            return await _get(url, token, own)
    async with session.get(url, headers=headers) as answer:
        return answer.status, await answer.text()


def test_a_decision_is_asked_once_and_reused_while_orchestrate_keeps_it() -> None:
    async def scenario(base: str, orchestrate: _Orchestrate, *_: Any) -> None:
        async with aiohttp.ClientSession() as session:
            for path in ("a", "b?x=1", "c"):
                got = await _get(f"{base}/endpoints/known/{path}", session=session)
                assert got == (200, f"hello /{path}")
        assert orchestrate.asked == [("known", "good")]

    _run(scenario)


def test_heads_differing_only_in_their_token_are_each_decided_by_their_own() -> None:
    async def scenario(base: str, orchestrate: _Orchestrate, *_: Any) -> None:
        url = f"{base}/endpoints/known/a"
        async with aiohttp.ClientSession() as session:
            assert await _get(url, session=session) == (200, "hello /a")
            assert (await _get(url, "other", session=session))[0] == 503
            assert await _get(url, session=session) == (200, "hello /a")
            # a malformed token is refused every time, by the proxy's process alone
            for _ in range(2):
                assert (await _get(url, "", session=session))[0] == 401
        assert orchestrate.asked == [("known", "good"), ("known", "other")]

    _run(scenario)


def test_a_decision_past_its_time_is_asked_again() -> None:
    async def scenario(base: str, orchestrate: _Orchestrate, *_: Any) -> None:
        async with aiohttp.ClientSession() as session:
            assert (await _get(f"{base}/endpoints/known/", session=session))[0] == 200
            await asyncio.sleep(0.3)
            assert (await _get(f"{base}/endpoints/known/", session=session))[0] == 200
        assert len(orchestrate.asked) == 2

    _run(scenario, keep=0.2)


def test_an_endpoint_orchestrate_forgets_is_asked_again_at_once() -> None:
    async def scenario(
        base: str, orchestrate: _Orchestrate, directory: _Directory, _: ProxyProcess
    ) -> None:
        async with aiohttp.ClientSession() as session:
            assert (await _get(f"{base}/endpoints/known/", session=session))[0] == 200
            assert (await _get(f"{base}/endpoints/known/", session=session))[0] == 200
            assert len(orchestrate.asked) == 1
            directory.forget("known")
            await asyncio.sleep(0.2)  # the channel is asynchronous: the message on its way
            assert (await _get(f"{base}/endpoints/known/", session=session))[0] == 200
        assert len(orchestrate.asked) == 2

    _run(scenario)


def test_a_revoked_tokens_decision_is_asked_again_at_once_and_no_other() -> None:
    async def scenario(base: str, orchestrate: _Orchestrate, *_: Any) -> None:
        url = f"{base}/endpoints/known/"
        async with aiohttp.ClientSession() as session:
            for token in ("good", "also-good"):
                assert (await _get(url, token, session=session))[0] == 200
            await orchestrate.forget_tokens(["good"])  # no wait: forgotten once it returns
            for token in ("good", "also-good"):
                assert (await _get(url, token, session=session))[0] == 200
        assert orchestrate.asked == [("known", "good"), ("known", "also-good"), ("known", "good")]

    _run(scenario)


def test_forgetting_every_token_asks_for_each_again() -> None:
    async def scenario(base: str, orchestrate: _Orchestrate, *_: Any) -> None:
        url = f"{base}/endpoints/known/"
        async with aiohttp.ClientSession() as session:
            for token in ("good", "also-good"):
                assert (await _get(url, token, session=session))[0] == 200
            await orchestrate.forget_tokens(None)
            for token in ("good", "also-good"):
                assert (await _get(url, token, session=session))[0] == 200
        assert len(orchestrate.asked) == 4

    _run(scenario)


def test_refusals_reach_the_client_as_orchestrate_decided_them() -> None:
    async def scenario(base: str, orchestrate: _Orchestrate, *_: Any) -> None:
        status, body = await _get(f"{base}/endpoints/absent/")
        assert status == 404 and "absent" in body
        async with (
            aiohttp.ClientSession() as session,
            session.get(
                f"{base}/endpoints/known/", headers={"FB-Authorization": "Bearer other"}
            ) as answer,
        ):
            assert answer.status == 503 and answer.headers["Retry-After"]
        # a refusal is not kept: asked each time
        assert (await _get(f"{base}/endpoints/absent/"))[0] == 404
        assert [asked[0] for asked in orchestrate.asked] == ["absent", "known", "absent"]
        # a request naming no endpoint is refused by the proxy's process alone
        assert (await _get(f"{base}/elsewhere"))[0] == 404
        assert len(orchestrate.asked) == 3

    _run(scenario)


def test_requests_to_a_pool_touch_it_in_the_keeper() -> None:
    async def scenario(base: str, orchestrate: _Orchestrate, *_: Any) -> None:
        assert (await _get(f"{base}/endpoints/known/"))[0] == 200
        for _ in range(50):
            if orchestrate.keeper.touched:
                break
            await asyncio.sleep(0.05)
        assert orchestrate.keeper.touched[0] == ("wf", "services.app", 30.0)

    _run(scenario, pool=True)


def test_the_proxy_process_is_started_again_when_it_ends() -> None:
    async def scenario(
        base: str, orchestrate: _Orchestrate, _: _Directory, process: ProxyProcess
    ) -> None:
        assert (await _get(f"{base}/endpoints/known/"))[0] == 200
        first = process.pids
        os.kill(first[0], signal.SIGKILL)
        deadline = time.monotonic() + 30
        while True:
            try:
                if process.pids != first and (await _get(f"{base}/endpoints/known/"))[0] == 200:
                    break
            except aiohttp.ClientError:
                pass  # the old process's connections end with it
            assert time.monotonic() < deadline, "the proxy's process was not started again"
            await asyncio.sleep(0.1)

    _run(scenario)


def test_routing_reads_paths_subdomains_and_the_tokens_cookie() -> None:
    routing = Routing("endpoints.test", "fb_token")
    assert routing.route("", "/endpoints/abc/x/y?q=1") == ("abc", "/x/y?q=1")
    assert routing.route("", "/endpoints/abc?q=1") == ("abc", "/?q=1")
    assert routing.route("abc.endpoints.test:8080", "/x") == ("abc", "/x")
    with pytest.raises(NotFound):
        routing.route("other.example", "/x")
    head = RequestHead.read(b"GET / HTTP/1.1\r\nCookie: a=1; fb_token=T0K; b=2\r\n\r\n")
    assert routing.token(head) == "T0K"
    assert routing.passed_cookie(head) == "a=1; b=2"


def test_the_web_ui_session_cookie_never_reaches_a_service() -> None:
    # it holds the visitor's API token, and path endpoints are on the Web UI's host, to
    # which a browser sends it on every port
    head = RequestHead.read(
        b"GET / HTTP/1.1\r\nCookie: a=1; fuzzball_session=T0K; fb_token=T0K; b=2\r\n\r\n"
    )
    assert Routing("", "fb_token").passed_cookie(head) == "a=1; b=2"
    assert Routing("", "").passed_cookie(head) == "a=1; fb_token=T0K; b=2"


def test_cookies_holding_no_token_pass_as_sent() -> None:
    head = RequestHead.read(b"GET / HTTP/1.1\r\nCookie: a=1; b=2\r\n\r\n")
    assert Routing("", "fb_token").passed_cookie(head) is None


def test_the_proxy_process_ends_quietly_when_orchestrate_dies_with_a_question_unread() -> None:
    # Orchestrate killed with the proxy's question unread: its end of the channel resets
    # (ECONNRESET), which ends the proxy's process like a closed channel, and the request
    # waiting on the question is answered 503
    async def main() -> None:
        ours, orchestrates = socket.socketpair()
        reader, writer = await asyncio.open_unix_connection(sock=ours)
        gate = WorkerGate(Routing("", ""), reader, writer)
        reading = asyncio.create_task(gate.run())
        head = RequestHead.read(
            b"GET /endpoints/known/ HTTP/1.1\r\nFB-Authorization: Bearer good\r\n\r\n"
        )
        asking = asyncio.create_task(gate(head))
        orchestrates.setblocking(False)
        async with asyncio.timeout(10):
            while not _waiting(orchestrates):
                await asyncio.sleep(0.01)  # the question not sent yet
        orchestrates.close()
        await asyncio.wait_for(reading, 10)
        with pytest.raises(Unavailable):
            await asking
        writer.close()

    endpoint_worker.run(main())


def _waiting(channel: socket.socket) -> bool:
    """Whether bytes wait unread on ``channel`` (non-blocking)."""
    try:
        return bool(channel.recv(1, socket.MSG_PEEK))
    except BlockingIOError:
        return False
