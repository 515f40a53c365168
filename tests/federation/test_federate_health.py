"""Federate's health: ``/healthz`` and ``/readyz`` on its REST port without a token; ready
while its store answers and a member is reachable; each member a condition of its own,
polled by a loop that no failure ends."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from support.cluster import free_port
from support.federation_harness import start_member
from support.live_api import LoopThread

from fuzzball_core.config import parse_config
from fuzzball_federation.main import build, serve
from fuzzball_federation.routers.fit import FitRouter

#: how often the served Federate polls its members in these tests (seconds)
POLL = 0.05


@pytest.fixture
def member(tmp_path):
    running = start_member(tmp_path, "onprem", [{"name": "n1", "cores": 4, "memory": 1 << 30}])
    try:
        yield running
    finally:
        running.close()


@contextmanager
def serve_federate(directory, clusters: list[dict[str, Any]]) -> Iterator[str]:
    """Federate serving over ``clusters`` on a free port; yields its URL."""
    listen = f"127.0.0.1:{free_port()}"
    config = parse_config(
        {
            "data-dir": str(directory / "federate"),
            "federate": {"listen": listen, "clusters": clusters, "member-timeout": 2},
        }
    )
    service = build(config, FitRouter({}))
    loop = LoopThread()
    stop = loop.run(_event())
    serving = asyncio.run_coroutine_threadsafe(serve(service, listen, stop, poll=POLL), loop.loop)
    try:
        yield f"http://{listen}"
    finally:
        loop.loop.call_soon_threadsafe(stop.set)
        serving.result(15)
        loop.stop()


async def _event() -> asyncio.Event:
    return asyncio.Event()


def readyz_once_polled(url: str) -> httpx.Response:
    """``/readyz`` once the members have been polled (a hang guard bounds the wait)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            reply = httpx.get(f"{url}/readyz", timeout=5)
            conditions = {c["name"]: c for c in reply.json()["conditions"]}
            if conditions["members"]["message"] != "members not polled yet":
                return reply
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "Federate never polled its members"
        time.sleep(0.05)


def conditions_of(reply: httpx.Response) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in reply.json()["conditions"]}


def test_federate_is_ready_with_a_reachable_member_and_names_the_unreachable_one(tmp_path, member):
    dead = f"http://127.0.0.1:{free_port()}"
    clusters = [
        {"name": "onprem", "address": member.rest_url, "token": member.token},
        {"name": "gone", "address": dead, "token": "x"},
    ]
    with serve_federate(tmp_path, clusters) as url:
        reply = readyz_once_polled(url)
        conditions = conditions_of(reply)

        assert reply.status_code == 200
        assert conditions["store"]["ok"] and conditions["members"]["ok"]
        assert conditions["cluster onprem"]["ok"]
        assert not conditions["cluster gone"]["ok"]
        assert "gone" in conditions["cluster gone"]["message"]


def test_federate_is_not_ready_when_no_member_is_reachable(tmp_path):
    clusters = [{"name": "gone", "address": f"http://127.0.0.1:{free_port()}", "token": "x"}]
    with serve_federate(tmp_path, clusters) as url:
        reply = readyz_once_polled(url)

        assert reply.status_code == 503
        assert conditions_of(reply)["members"]["message"] == "no member is reachable (gone)"


def test_federate_answers_healthz_without_a_token(tmp_path):
    clusters = [{"name": "gone", "address": f"http://127.0.0.1:{free_port()}", "token": "x"}]
    with serve_federate(tmp_path, clusters) as url:
        readyz_once_polled(url)
        reply = httpx.get(f"{url}/healthz", timeout=5)

        assert reply.status_code == 200
        assert reply.json()["process"] == "federate" and reply.json()["alive"] is True
