"""The agent's health: registered and streaming conditions, and heartbeats that go on after a
turn of their loop raised (a heartbeat loop that died would cost the node its lease and its
jobs). Orchestrate is the scripted server of support/scripted_orchestrate.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from support.scripted_orchestrate import ScriptedOrchestrate, scripted_agent, serve

from fuzzball_core.substrate.agent import REGISTERED, STREAM

pytestmark = pytest.mark.root


def heartbeats(orchestrate: ScriptedOrchestrate) -> int:
    return sum(1 for m in orchestrate.received if m.HasField("heartbeat"))


def test_heartbeats_go_on_after_a_turn_of_their_loop_raises(tmp_path: Path) -> None:
    async def scenario() -> tuple[list[int], int]:
        orchestrate = ScriptedOrchestrate()
        server, port = await serve(orchestrate)
        agent = scripted_agent(tmp_path, port)
        expired: list[int] = []

        def expire_fails_once(_now: float) -> None:
            expired.append(heartbeats(orchestrate))
            if len(expired) == 1:
                raise OSError("volume directory vanished")

        agent.services.volumes.expire = expire_fails_once  # type: ignore[method-assign]
        stop = asyncio.Event()
        running = asyncio.create_task(agent.run(stop))
        try:
            await orchestrate.wait_for(
                "a heartbeat after the failed turn",
                lambda: bool(expired) and heartbeats(orchestrate) > expired[0],
            )
        finally:
            stop.set()
            await running
            await server.stop(grace=None)
        return expired, heartbeats(orchestrate)

    expired, sent = asyncio.run(scenario())

    # the first turn's expiry raised after the heartbeats counted then; more came after it
    assert sent > expired[0]


def test_the_agent_is_ready_once_registered_and_welcomed_and_not_once_the_stream_ends(
    tmp_path: Path,
) -> None:
    async def scenario() -> tuple[bool, bool, str]:
        orchestrate = ScriptedOrchestrate()
        server, port = await serve(orchestrate)
        agent = scripted_agent(tmp_path, port)
        stop = asyncio.Event()
        running = asyncio.create_task(agent.run(stop))
        try:
            await asyncio.wait_for(orchestrate.connected.wait(), 30)
            while not agent.health.get(STREAM).ok:  # the Welcome is on its way
                await asyncio.sleep(0.01)
            ready_while_up = agent.health.ready()
            await server.stop(grace=None)
            while agent.health.get(STREAM).ok:
                await asyncio.sleep(0.01)
        finally:
            stop.set()
            await running
        return ready_while_up, agent.health.ready(), agent.health.get(STREAM).message

    ready_while_up, ready_after, message = asyncio.run(scenario())

    assert ready_while_up
    assert not ready_after and message.startswith("the stream to 127.0.0.1:")


def test_an_agent_that_never_registered_is_not_ready(tmp_path: Path) -> None:
    agent = scripted_agent(tmp_path, 1)

    assert not agent.health.ready()
    assert agent.health.get(REGISTERED).message == "not registered with 127.0.0.1:1 yet"
