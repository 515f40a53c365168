"""``fuzzball local``'s readiness: a process is ready when its own ``/readyz`` says so, and
``local status`` lists the conditions it answers with; something else on the port, or
nothing at all, is never taken for a ready process."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from aiohttp import web
from support.ports import free_port

from fuzzball_core.cli import local
from fuzzball_core.config import FuzzballConfig, parse_config
from fuzzball_core.health import Health, health_routes


@contextmanager
def serving(add_routes: Callable[[web.Application], None]) -> Iterator[str]:
    """An aiohttp app with ``add_routes(app)`` on a free loopback port, served from a loop in
    a thread; yields its host:port."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    listen = f"127.0.0.1:{free_port()}"

    async def start() -> web.AppRunner:
        app = web.Application()
        add_routes(app)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, *listen.split(":")).start()
        return runner

    runner = asyncio.run_coroutine_threadsafe(start(), loop).result(30)
    try:
        yield listen
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def config_with(substrate_listen: str) -> FuzzballConfig:
    return parse_config({"substrate": {"metrics-listen": substrate_listen}})


@pytest.fixture
def agent_health() -> Health:
    health = Health("substrate")
    health.declare("registered")
    health.declare("stream")
    return health


@pytest.fixture
def agent(agent_health: Health) -> Iterator[str]:
    with serving(health_routes(agent_health)) as listen:
        yield listen


def test_an_agent_not_yet_streaming_is_not_ready_and_says_why(agent, agent_health):
    agent_health.passed("registered")
    agent_health.failed("stream", "the stream to 127.0.0.1:1 ended (UNAVAILABLE)")

    seen = local.readiness(config_with(agent), "substrate")

    assert seen["ready"] is False
    assert {c["name"]: c["message"] for c in seen["conditions"]}["stream"] == (
        "the stream to 127.0.0.1:1 ended (UNAVAILABLE)"
    )


def test_an_agent_registered_and_streaming_is_ready(agent, agent_health):
    agent_health.passed("registered")
    agent_health.passed("stream")

    assert local.readiness(config_with(agent), "substrate")["ready"] is True


def test_nothing_listening_is_not_ready():
    seen = local.readiness(config_with(f"127.0.0.1:{free_port()}"), "substrate")

    assert seen["ready"] is False and seen["problem"]


def test_another_server_on_the_port_is_not_taken_for_the_agent():
    def other(app: web.Application) -> None:
        async def readyz(_request: web.Request) -> web.Response:
            return web.json_response({"status": "fine"})

        app.router.add_get("/readyz", readyz)

    with serving(other) as listen:
        seen = local.readiness(config_with(listen), "substrate")

    assert seen["ready"] is None and "is not substrate's" in seen["problem"]


def test_an_agent_without_a_metrics_port_has_no_readiness_to_ask():
    seen = local.readiness(config_with(""), "substrate")

    assert seen["ready"] is None and "metrics-listen is off" in seen["problem"]
