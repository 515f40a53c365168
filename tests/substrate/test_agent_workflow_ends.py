"""A node keeps each workflow's directory until Orchestrate says the workflow ended: on the
stream as it ends, or answering the Hello of a node that reconnected (or restarted) and names
the workflows it keeps. Orchestrate is the scripted server of support/scripted_orchestrate.py;
the agent is real (no container runs: the tests play a run's use of the volumes)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from support.scripted_orchestrate import (
    WORKFLOW,
    ScriptedOrchestrate,
    agent_running,
    scripted_agent,
    serve,
)

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.config import ConfigError, parse_config
from fuzzball_core.plugins import get_registry
from fuzzball_core.substrate.agent import Agent

pytestmark = pytest.mark.root

#: an Orchestrate that tells workflow ends, with heartbeat turns (which remove) every 50 ms
TELLING = node_pb2.Welcome(lease_seconds=3.0, heartbeat_seconds=0.05, tells_workflow_ends=True)


def kept_in_hellos(orchestrate: ScriptedOrchestrate) -> list[list[str]]:
    return [
        list(message.hello.workflow_ids)
        for message in orchestrate.received
        if message.HasField("hello")
    ]


async def until(what: str, condition: Callable[[], bool], timeout: float = 20) -> None:
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.02)

    try:
        await asyncio.wait_for(poll(), timeout)
    except TimeoutError:
        raise AssertionError(f"never: {what}") from None


def workflow_used(agent: Agent, ago: float = 0.0) -> Path:
    """A run of WORKFLOW wrote a file in its volume here and ended ``ago`` seconds ago: the
    file."""
    volumes = agent.services.volumes
    volumes.acquire(WORKFLOW)
    written = volumes.volume_dir(WORKFLOW, "data") / "result"
    written.write_text("job A's")
    volumes.release(WORKFLOW, now=time.time() - ago)
    return written


def scenario(
    tmp_path: Path,
    play: Callable[[ScriptedOrchestrate, Agent], Awaitable[None]],
    welcome: node_pb2.Welcome = TELLING,
    before: Callable[[Agent], None] | None = None,
) -> ScriptedOrchestrate:
    orchestrate = ScriptedOrchestrate(welcome)

    async def run() -> None:
        server, port = await serve(orchestrate)
        agent = scripted_agent(tmp_path, port)
        if before is not None:
            before(agent)
        async with agent_running(agent, server):
            await asyncio.wait_for(orchestrate.connected.wait(), 30)
            await play(orchestrate, agent)

    asyncio.run(run())
    return orchestrate


def ended(*workflow_ids: str) -> node_pb2.WorkflowEnded:
    return node_pb2.WorkflowEnded(workflow_ids=list(workflow_ids))


def test_a_workflow_directory_outlives_its_last_run_while_orchestrate_is_connected(
    tmp_path: Path,
) -> None:
    async def play(orchestrate: ScriptedOrchestrate, agent: Agent) -> None:
        # more than the five minutes volumes once had: a dependent job waited that long
        written = workflow_used(agent, ago=301)
        heartbeats = len(orchestrate.received)
        await until("several heartbeat turns", lambda: len(orchestrate.received) > heartbeats + 3)
        assert written.read_text() == "job A's"

    scenario(tmp_path, play)


def test_the_directory_is_removed_once_orchestrate_says_the_workflow_ended(
    tmp_path: Path,
) -> None:
    async def play(orchestrate: ScriptedOrchestrate, agent: Agent) -> None:
        workflow_used(agent)
        directory = agent.services.volumes.workflow_dir(WORKFLOW)
        orchestrate.send(workflow_ended=ended(WORKFLOW))
        # the directory itself, not a file in it: the removal takes the files first
        await until("the workflow's directory is removed", lambda: not directory.exists())

    scenario(tmp_path, play)


def test_on_reconnect_a_kept_directory_of_a_workflow_that_ended_meanwhile_is_removed(
    tmp_path: Path,
) -> None:
    async def play(orchestrate: ScriptedOrchestrate, agent: Agent) -> None:
        # read before hanging up: the hang-up stops the stream's reader, and a Hello still
        # unread then would never be counted
        await until("the first Hello", lambda: len(kept_in_hellos(orchestrate)) == 1)
        written = workflow_used(agent)
        orchestrate.hang_up()  # the workflow ends while the node is away: no message
        await until("a second Hello", lambda: len(kept_in_hellos(orchestrate)) >= 2)
        assert kept_in_hellos(orchestrate)[1] == [WORKFLOW]
        orchestrate.send(workflow_ended=ended(WORKFLOW))  # the answer to that Hello
        await until("the workflow's directory is removed", lambda: not written.exists())

    scenario(tmp_path, play)


def test_a_restarted_agent_names_its_leftover_workflows_in_its_hello(tmp_path: Path) -> None:
    def left_by_a_previous_agent(agent: Agent) -> None:
        agent.services.volumes.volume_dir(WORKFLOW, "data")

    async def play(orchestrate: ScriptedOrchestrate, agent: Agent) -> None:
        await until("the Hello", lambda: bool(kept_in_hellos(orchestrate)))

    orchestrate = scenario(tmp_path, play, before=left_by_a_previous_agent)

    assert kept_in_hellos(orchestrate) == [[WORKFLOW]]


def test_the_backstop_is_substrate_workflow_volume_retention(tmp_path: Path) -> None:
    config = parse_config(
        {
            "data-dir": str(tmp_path),
            "substrate": {"work-dir": str(tmp_path / "node"), "workflow-volume-retention": "2h"},
        }
    )

    assert Agent(config, get_registry()).services.volumes.retention == 7200.0


def test_a_retention_that_is_not_a_duration_is_refused_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"substrate\.workflow-volume-retention: must be"):
        parse_config({"substrate": {"workflow-volume-retention": "soon"}})
