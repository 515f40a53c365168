"""The agent told ``Shutdown`` (its node was deprovisioned): it takes no more work, stops what
is still running, reports it, closes its stream cleanly and returns.

Orchestrate here is a scripted ``NodeAgent`` server on loopback: the test decides what it
sends down the stream and reads what the real agent sends up.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from support.scripted_orchestrate import (
    ScriptedOrchestrate,
    agent_running,
    assignment,
    scripted_agent,
    serve,
)

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.substrate.agent import Agent

pytestmark = pytest.mark.root

REASON = "deprovisioned: the node is empty"


def _agent(tmp_path: Path, port: int, images: dict[str, object] | None = None) -> Agent:
    return scripted_agent(tmp_path, port, images, name="leaving-node")


def test_shutdown_makes_the_agent_close_its_stream_and_return_saying_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> tuple[Agent, ScriptedOrchestrate]:
        orchestrate = ScriptedOrchestrate()
        server, port = await serve(orchestrate)
        agent = _agent(tmp_path, port)
        async with agent_running(agent, server) as running:
            await asyncio.wait_for(orchestrate.connected.wait(), 30)
            orchestrate.send(shutdown=node_pb2.Shutdown(reason=REASON))
            await asyncio.wait_for(asyncio.shield(running), 30)
        return agent, orchestrate

    with caplog.at_level(logging.INFO, logger="fuzzball.substrate"):
        agent, orchestrate = asyncio.run(scenario())

    assert agent.deprovisioned == REASON
    assert orchestrate.half_closed.is_set()
    assert f"node leaving-node was deprovisioned by Orchestrate ({REASON})" in caplog.text
    assert "reconnecting" not in caplog.text


def test_after_shutdown_running_work_is_stopped_and_reported_and_new_work_refused(
    tmp_path: Path, images_config: dict[str, object]
) -> None:
    async def scenario() -> ScriptedOrchestrate:
        orchestrate = ScriptedOrchestrate()
        server, port = await serve(orchestrate)
        async with agent_running(_agent(tmp_path, port, images_config), server) as running:
            await asyncio.wait_for(orchestrate.connected.wait(), 30)
            orchestrate.send(assign=assignment(7, ["/bin/sh", "-c", "sleep 600"]))
            await orchestrate.wait_for(
                "run 7's start",
                lambda: any(m.started.run_id == 7 for m in orchestrate.received),
                timeout=60,
            )
            orchestrate.send(shutdown=node_pb2.Shutdown(reason=REASON))
            orchestrate.send(assign=assignment(8, ["/bin/sh", "-c", "true"]))
            await asyncio.wait_for(asyncio.shield(running), 30)
        return orchestrate

    orchestrate = asyncio.run(scenario())

    exits = orchestrate.exits()
    assert exits[7].canceled
    assert exits[8].message == "node leaving-node is being deprovisioned and takes no new work"
    assert not any(m.started.run_id == 8 for m in orchestrate.received)
    assert orchestrate.half_closed.is_set()
