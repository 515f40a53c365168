"""What a job prints reaches Orchestrate even when the stream breaks, or Orchestrate stops,
before it was stored: the agent counts each run's output chunks (``LogData.seq``) and keeps
every chunk until Orchestrate's ``LogsStored`` covers it, sending what is not covered again
on its next stream, in order and before the run's exit. An Orchestrate whose Welcome does
not say it acknowledges (an older one) gets each chunk once, as before. A short job's last
output goes in the same stream write as its exit.

Orchestrate here is a scripted ``NodeAgent`` server on loopback that hangs up when told; the
agent and its container are real.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
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

pytestmark = pytest.mark.root

RUN = 7
#: three lines far enough apart to leave the container as three chunks
PRINTS = ["/bin/sh", "-c", "echo one; sleep 0.3; echo two; sleep 0.3; echo three"]
ACKNOWLEDGING = node_pb2.Welcome(lease_seconds=3.0, acknowledges_logs=True)


def output(stream: list[node_pb2.NodeMessage]) -> list[tuple[int, bytes]]:
    return [(m.log.seq, m.log.data) for m in stream if m.HasField("log")]


def kinds(stream: list[node_pb2.NodeMessage]) -> list[str]:
    return [str(m.WhichOneof("kind")) for m in stream if m.WhichOneof("kind") != "heartbeat"]


def reconnect_after_the_exit(
    tmp_path: Path,
    images_config: dict[str, object],
    welcome: node_pb2.Welcome,
    before_hanging_up: Callable[[ScriptedOrchestrate], Awaitable[None]] | None = None,
) -> ScriptedOrchestrate:
    """Run :data:`PRINTS` to its exit, hang up (after ``before_hanging_up``), and return
    once the agent's next stream has sent the run's exit again."""

    def exit_on_second_stream() -> bool:
        return len(orchestrate.streams) > 1 and "exited" in kinds(orchestrate.streams[1])

    async def scenario() -> None:
        server, port = await serve(orchestrate)
        async with agent_running(scripted_agent(tmp_path, port, images_config), server):
            await asyncio.wait_for(orchestrate.connected.wait(), 30)
            orchestrate.send(assign=assignment(RUN, PRINTS))
            await orchestrate.wait_for("the run's exit", lambda: RUN in orchestrate.exits(), 60)
            if before_hanging_up is not None:
                await before_hanging_up(orchestrate)
            orchestrate.hang_up()
            await orchestrate.wait_for("the exit on a second stream", exit_on_second_stream)

    orchestrate = ScriptedOrchestrate(welcome)
    asyncio.run(scenario())
    return orchestrate


def stored_through(seq: int) -> Callable[[ScriptedOrchestrate], Awaitable[None]]:
    async def answer(orchestrate: ScriptedOrchestrate) -> None:
        orchestrate.send(logs_stored=node_pb2.LogsStored(through_seq={RUN: seq}))

    return answer


def test_output_chunks_are_counted_from_one(tmp_path, images_config):
    orchestrate = reconnect_after_the_exit(tmp_path, images_config, ACKNOWLEDGING)
    first = output(orchestrate.streams[0])
    assert [seq for seq, _ in first] == list(range(1, len(first) + 1))
    assert b"".join(data for _, data in first) == b"one\ntwo\nthree\n"


def test_output_not_acknowledged_is_sent_again_on_the_next_stream_before_the_exit(
    tmp_path, images_config
):
    orchestrate = reconnect_after_the_exit(tmp_path, images_config, ACKNOWLEDGING)
    first, second = orchestrate.streams[:2]
    assert output(second) == output(first)
    assert kinds(second)[-1] == "exited"
    assert set(kinds(second)) == {"hello", "log", "exited"}


def test_output_a_logs_stored_covers_is_not_sent_again(tmp_path, images_config):
    orchestrate = reconnect_after_the_exit(
        tmp_path, images_config, ACKNOWLEDGING, stored_through(10**6)
    )
    assert output(orchestrate.streams[1]) == []


def test_only_the_output_past_what_logs_stored_covers_is_sent_again(tmp_path, images_config):
    orchestrate = reconnect_after_the_exit(
        tmp_path, images_config, ACKNOWLEDGING, stored_through(1)
    )
    first, second = orchestrate.streams[:2]
    assert len(output(first)) > 1
    assert output(second) == output(first)[1:]


def test_an_orchestrate_that_does_not_acknowledge_output_gets_it_once(tmp_path, images_config):
    orchestrate = reconnect_after_the_exit(
        tmp_path, images_config, node_pb2.Welcome(lease_seconds=3.0)
    )
    assert b"".join(data for _, data in output(orchestrate.streams[0])) == b"one\ntwo\nthree\n"
    assert output(orchestrate.streams[1]) == []


def test_a_short_jobs_last_output_goes_in_the_same_write_as_its_exit(tmp_path, images_config):
    async def scenario() -> None:
        server, port = await serve(orchestrate)
        async with agent_running(scripted_agent(tmp_path, port, images_config), server):
            await asyncio.wait_for(orchestrate.connected.wait(), 30)
            orchestrate.send(assign=assignment(RUN, ["/bin/sh", "-c", "echo done"]))
            await orchestrate.wait_for("the run's exit", lambda: RUN in orchestrate.exits(), 60)

    orchestrate = ScriptedOrchestrate(node_pb2.Welcome(lease_seconds=3.0, accepts_batches=True))
    asyncio.run(scenario())
    (exit_write,) = [write for write in orchestrate.writes if "exited" in write]
    assert exit_write[-2:] == ["log", "exited"]
