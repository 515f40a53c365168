"""The REST gateway on a thread of its own (GatewayThread): handlers marked any_thread are
served there while the home loop is held; the others run on the home loop, bodies and
forms included; stopping ends the thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from aiohttp import web
from support.cluster import free_port

from fuzzball_core.api.gateway_thread import (
    HOME_LOOP,
    GatewayThread,
    HomeLoop,
    any_thread,
    home_loop_middleware,
)

#: long enough for any loaded machine to answer; the tests wait on events, not on time
PATIENCE = 60.0


@any_thread
async def _here(_request: web.Request) -> web.Response:
    return web.Response(text=threading.current_thread().name)


async def _home(_request: web.Request) -> web.Response:
    return web.Response(text=threading.current_thread().name)


async def _echo_json(request: web.Request) -> web.Response:
    return web.json_response({"thread": threading.current_thread().name, **await request.json()})


async def _echo_form(request: web.Request) -> web.Response:
    return web.Response(text=str((await request.post())["name"]))


def _gateway_threads() -> set[threading.Thread]:
    return {thread for thread in threading.enumerate() if thread.name == "rest-gateway"}


@dataclass
class Served:
    url: str
    home_loop: asyncio.AbstractEventLoop
    home_thread: threading.Thread
    gateway: GatewayThread
    #: gateway threads of other servers in this process (a test cluster's) before this one
    other_gateways: set[threading.Thread]


@pytest.fixture
def served() -> Iterator[Served]:
    app = web.Application(middlewares=[home_loop_middleware])
    app[HOME_LOOP] = HomeLoop()
    app.router.add_get("/here", _here)
    app.router.add_get("/home", _home)
    app.router.add_post("/json", _echo_json)
    app.router.add_post("/form", _echo_form)
    port = free_port()
    loop = asyncio.new_event_loop()
    home = threading.Thread(target=loop.run_forever, name="home")
    home.start()
    gateway = GatewayThread(app, "127.0.0.1", port)
    others = _gateway_threads()
    asyncio.run_coroutine_threadsafe(gateway.start(), loop).result(PATIENCE)
    try:
        yield Served(f"http://127.0.0.1:{port}", loop, home, gateway, others)
    finally:
        asyncio.run_coroutine_threadsafe(gateway.stop(), loop).result(PATIENCE)
        loop.call_soon_threadsafe(loop.stop)
        home.join(PATIENCE)
        loop.close()


def test_a_handler_marked_any_thread_is_served_on_the_gateways_thread(served):
    assert httpx.get(f"{served.url}/here", timeout=PATIENCE).text == "rest-gateway"


def test_an_unmarked_handler_runs_on_the_home_loop(served):
    assert httpx.get(f"{served.url}/home", timeout=PATIENCE).text == "home"


def test_a_marked_handler_answers_while_the_home_loop_is_held(served):
    held, answered = threading.Event(), threading.Event()
    hold_ended_by: list[str] = []

    def hold() -> None:  # a pass holding the home loop until the answer came (or long)
        held.set()
        hold_ended_by.append("answer" if answered.wait(PATIENCE) else "time")

    served.home_loop.call_soon_threadsafe(hold)
    assert held.wait(PATIENCE)
    reply = httpx.get(f"{served.url}/here", timeout=2 * PATIENCE)
    answered.set()
    assert reply.status_code == 200
    asyncio.run_coroutine_threadsafe(asyncio.sleep(0), served.home_loop).result(PATIENCE)
    # had the request needed the home loop, the hold would have ended by its time
    assert hold_ended_by == ["answer"]


def test_a_json_body_reaches_a_handler_on_the_home_loop(served):
    reply = httpx.post(f"{served.url}/json", json={"name": "hello"}, timeout=PATIENCE)
    assert reply.json() == {"thread": "home", "name": "hello"}


def test_a_form_reaches_a_handler_on_the_home_loop(served):
    reply = httpx.post(f"{served.url}/form", data={"name": "hello"}, timeout=PATIENCE)
    assert reply.text == "hello"


def test_a_route_that_does_not_exist_is_answered_by_the_gateway(served):
    assert httpx.get(f"{served.url}/nowhere", timeout=PATIENCE).status_code == 404


def test_stopping_closes_the_port_and_ends_the_thread(served):
    asyncio.run_coroutine_threadsafe(served.gateway.stop(), served.home_loop).result(PATIENCE)
    assert _gateway_threads() == served.other_gateways
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{served.url}/here", timeout=PATIENCE)
