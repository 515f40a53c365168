"""Readiness probes against real listeners on loopback."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from support.cluster import free_port

from fuzzball_core.spec.models import Probe
from fuzzball_core.substrate.probes import check, wait_until_ready


@pytest.fixture
def http_server() -> Iterator[ThreadingHTTPServer]:
    """Answers /healthz with 200 and anything else with 503."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            ok = self.path == "/healthz" and self.headers.get("X-Probe") == "yes"
            self.send_response(200 if ok else 503)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()


def _probe(**fields: object) -> Probe:
    return Probe.model_validate(fields)


def test_a_tcp_probe_succeeds_only_while_something_listens() -> None:
    port = free_port()
    probe = _probe(**{"tcp-socket": {"port": port}})
    assert asyncio.run(check(probe)) is False
    with socket.create_server(("127.0.0.1", port)):
        assert asyncio.run(check(probe)) is True


def test_an_http_probe_needs_a_2xx_or_3xx_answer(http_server) -> None:
    port = http_server.server_port
    good = {"port": port, "path": "/healthz", "http-headers": [{"name": "X-Probe", "value": "yes"}]}
    assert asyncio.run(check(_probe(**{"http-get": good}))) is True
    assert asyncio.run(check(_probe(**{"http-get": {**good, "path": "/other"}}))) is False
    assert asyncio.run(check(_probe(**{"http-get": {"port": free_port()}}))) is False


def test_readiness_waits_for_the_listener_and_the_success_threshold() -> None:
    port = free_port()
    probe = _probe(**{"tcp-socket": {"port": port}, "period-seconds": 1, "success-threshold": 2})
    checks: list[bool] = []

    async def scenario() -> bool:
        async def listen_later() -> None:
            await asyncio.sleep(1.5)
            server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", port)
            checks.append(True)
            await asyncio.sleep(10)
            server.close()

        listener = asyncio.create_task(listen_later())
        try:
            return await asyncio.wait_for(wait_until_ready(probe, lambda: True), 10)
        finally:
            listener.cancel()

    assert asyncio.run(scenario()) is True
    assert checks == [True]


def test_readiness_gives_up_when_the_service_stopped() -> None:
    probe = _probe(**{"tcp-socket": {"port": free_port()}, "period-seconds": 1})
    running = [True, False]
    assert asyncio.run(wait_until_ready(probe, lambda: running.pop(0))) is False
