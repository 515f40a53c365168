"""Substrate dials Orchestrate over TLS and verifies its certificate against ``tls.ca-file``: a
server whose certificate another CA signed is never registered with, and the object cache is
fetched over https with the same CA. Orchestrate is the scripted server of
support/scripted_orchestrate.py, here serving TLS."""

from __future__ import annotations

import asyncio
import http.server
import logging
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from support.scripted_orchestrate import ScriptedOrchestrate

from fuzzball_core.api.v1 import node_pb2_grpc
from fuzzball_core.certificates import CertificateAuthority
from fuzzball_core.config import parse_config
from fuzzball_core.drivers import ResolvedImage
from fuzzball_core.errors import NotFound, Unavailable
from fuzzball_core.plugins import get_registry
from fuzzball_core.substrate.agent import REGISTERED, Agent

pytestmark = pytest.mark.root


async def _serve_tls(
    orchestrate: ScriptedOrchestrate, ca: CertificateAuthority, directory: Path
) -> tuple[grpc.aio.Server, int]:
    issued = ca.issue_server_certificate(
        directory / "server.crt", directory / "server.key", ["127.0.0.1", "localhost"]
    )
    credentials = grpc.ssl_server_credentials(
        [(issued.key_file.read_bytes(), issued.cert_file.read_bytes())]
    )
    server = grpc.aio.server()
    node_pb2_grpc.add_NodeAgentServicer_to_server(orchestrate, server)
    port = server.add_secure_port("127.0.0.1:0", credentials)
    await server.start()
    return server, port


def _agent(
    tmp_path: Path, port: int, trusted: CertificateAuthority, object_cache: str = ""
) -> Agent:
    config = parse_config(
        {
            "data-dir": str(tmp_path / "data"),
            "tls": {"ca-file": str(trusted.cert_file)},
            "substrate": {
                "orchestrate-address": f"127.0.0.1:{port}",
                "node-token": "token",
                "node-name": "tls-node",
                "work-dir": str(tmp_path / "node"),
                "cores": 2,
                "memory": "1GiB",
            },
            "images": {"object-cache-url": object_cache},
        }
    )
    return Agent(config, get_registry())


def test_the_agent_registers_with_an_orchestrate_whose_certificate_its_ca_signed(
    tmp_path: Path,
) -> None:
    ca = CertificateAuthority.create(tmp_path / "ca")

    async def scenario() -> bool:
        orchestrate = ScriptedOrchestrate()
        server, port = await _serve_tls(orchestrate, ca, tmp_path)
        agent = _agent(tmp_path, port, trusted=ca)
        stop = asyncio.Event()
        running = asyncio.create_task(agent.run(stop))
        try:
            await asyncio.wait_for(orchestrate.connected.wait(), 30)
        finally:
            stop.set()
            await running
            await server.stop(grace=None)
        return agent.health.get(REGISTERED).ok

    assert asyncio.run(scenario())


def test_the_agent_refuses_an_orchestrate_whose_certificate_another_ca_signed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ours = CertificateAuthority.create(tmp_path / "ours")
    theirs = CertificateAuthority.create(tmp_path / "theirs")
    caplog.set_level(logging.INFO, logger="fuzzball")

    def refused() -> bool:
        return any("unavailable (UNAVAILABLE)" in r.getMessage() for r in caplog.records)

    async def scenario() -> tuple[bool, bool]:
        orchestrate = ScriptedOrchestrate()
        server, port = await _serve_tls(orchestrate, theirs, tmp_path)
        agent = _agent(tmp_path, port, trusted=ours)
        stop = asyncio.Event()
        running = asyncio.create_task(agent.run(stop))
        try:
            async with asyncio.timeout(30):
                while not refused():  # the first attempt ended: the handshake failed
                    await asyncio.sleep(0.05)
        finally:
            stop.set()
            await running
            await server.stop(grace=None)
        return orchestrate.connected.is_set(), agent.health.get(REGISTERED).ok

    connected, registered = asyncio.run(scenario())

    assert not connected and not registered


class _Empty(http.server.BaseHTTPRequestHandler):
    """An object cache that holds nothing (404 to every request)."""

    def do_GET(self) -> None:
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def https_cache(tmp_path: Path) -> Iterator[tuple[str, CertificateAuthority]]:
    """An https object cache on loopback with a certificate from its own CA."""
    ca = CertificateAuthority.create(tmp_path / "cache-ca")
    issued = ca.issue_server_certificate(
        tmp_path / "cache.crt", tmp_path / "cache.key", ["127.0.0.1"]
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(issued.cert_file, issued.key_file)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Empty)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}", ca
    finally:
        server.shutdown()
        server.server_close()


IMAGE = ResolvedImage("fuzzball://user/tools", "sha256:" + "0" * 64, 0, "")


def test_the_object_cache_is_reached_over_https_trusting_the_configured_ca(
    tmp_path: Path, https_cache: tuple[str, CertificateAuthority]
) -> None:
    url, ca = https_cache
    agent = _agent(tmp_path, 1, trusted=ca, object_cache=url)
    backend = agent.services.images.backend("fuzzball")

    # a verified handshake, then the cache's answer: it holds no image of that digest
    with pytest.raises(NotFound, match="holds no image"):
        backend.fetch(IMAGE, tmp_path / "cache")


def test_an_object_cache_with_another_cas_certificate_is_refused(
    tmp_path: Path, https_cache: tuple[str, CertificateAuthority]
) -> None:
    url, _ = https_cache
    stranger = CertificateAuthority.create(tmp_path / "stranger")
    agent = _agent(tmp_path, 1, trusted=stranger, object_cache=url)
    backend = agent.services.images.backend("fuzzball")

    with pytest.raises(Unavailable, match="CERTIFICATE_VERIFY_FAILED"):
        backend.fetch(IMAGE, tmp_path / "cache")
