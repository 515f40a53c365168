"""Batched writes on the node stream: what is queued goes down and up in one write."""

from __future__ import annotations

import asyncio
from collections import deque

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.orchestrate.node_hub import NodeHub
from fuzzball_core.substrate.agent import (
    BATCH_BYTES,
    BATCH_MESSAGES,
    batch_of,
    take_batch,
    writes,
)


def _cancel(run_id: int) -> node_pb2.ControlMessage:
    return node_pb2.ControlMessage(cancel=node_pb2.Cancel(run_id=run_id))


def _run_ids(write: node_pb2.ControlMessage) -> list[int]:
    if write.WhichOneof("kind") == "batch":
        return [m.cancel.run_id for m in write.batch.messages]
    return [write.cancel.run_id]


def test_a_batching_node_gets_everything_queued_in_one_write_in_order() -> None:
    async def scenario() -> list[list[int]]:
        queue = NodeHub().attach("n1", batches=True)
        for run_id in (1, 2, 3):
            queue.put_nowait(_cancel(run_id))
        first = await queue.next_write()
        queue.put_nowait(_cancel(4))
        second = await queue.next_write()
        assert first is not None and second is not None
        return [_run_ids(first), _run_ids(second)]

    assert asyncio.run(scenario()) == [[1, 2, 3], [4]]


def test_a_node_that_did_not_ask_for_batches_gets_one_message_per_write() -> None:
    async def scenario() -> list[str | None]:
        queue = NodeHub().attach("n1")
        queue.put_nowait(_cancel(1))
        queue.put_nowait(_cancel(2))
        writes = [await queue.next_write(), await queue.next_write()]
        return [w.WhichOneof("kind") if w is not None else None for w in writes]

    assert asyncio.run(scenario()) == ["cancel", "cancel"]


def test_the_stream_ends_after_what_was_queued_before_its_end() -> None:
    async def scenario() -> tuple[list[int], node_pb2.ControlMessage | None]:
        hub = NodeHub()
        queue = hub.attach("n1", batches=True)
        queue.put_nowait(_cancel(1))
        queue.put_nowait(_cancel(2))
        hub.attach("n1", batches=True)  # a new stream replaces it: the old one is told to end
        queue.put_nowait(_cancel(3))  # never sent: it came after the end
        write = await queue.next_write()
        assert write is not None
        return _run_ids(write), await queue.next_write()

    assert asyncio.run(scenario()) == ([1, 2], None)


def _log(size: int) -> node_pb2.NodeMessage:
    return node_pb2.NodeMessage(log=node_pb2.LogData(run_id=1, data=b"x" * size))


def test_an_agent_write_holds_at_most_the_batch_limits_and_always_one_message() -> None:
    beats = deque(node_pb2.NodeMessage(heartbeat=node_pb2.Heartbeat()) for _ in range(600))
    assert len(take_batch(beats)) == BATCH_MESSAGES
    assert len(beats) == 600 - BATCH_MESSAGES

    logs = deque([_log(BATCH_BYTES // 2), _log(BATCH_BYTES // 2), _log(1)])
    assert len(take_batch(logs)) == 2
    huge = deque([_log(2 * BATCH_BYTES), _log(1)])
    assert len(take_batch(huge)) == 1  # larger than a batch: still sent, alone


def test_one_message_is_written_as_itself_and_several_as_a_batch() -> None:
    beat = node_pb2.NodeMessage(heartbeat=node_pb2.Heartbeat())
    assert batch_of([beat]).WhichOneof("kind") == "heartbeat"
    both = batch_of([beat, _log(3)])
    assert [m.WhichOneof("kind") for m in both.batch.messages] == ["heartbeat", "log"]


def test_an_orchestrate_that_did_not_say_it_reads_batches_gets_each_message_alone() -> None:
    beats = [node_pb2.NodeMessage(heartbeat=node_pb2.Heartbeat()) for _ in range(3)]
    assert [w.WhichOneof("kind") for w in writes(beats, batches=False)] == ["heartbeat"] * 3
    assert [w.WhichOneof("kind") for w in writes(beats, batches=True)] == ["batch"]
