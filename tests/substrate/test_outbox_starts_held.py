"""A stream write of ``started`` reports alone waits a moment for what follows (the agent's
``Outbox.take`` with ``hold_starts``): a short job's start and exit share one write instead
of one each; nothing but starts is ever held, and held starts a broken stream did not take
stay queued for the next one."""

from __future__ import annotations

import asyncio

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.substrate.agent import Outbox

#: long enough that a message put on the next loop turn arrives within it
HOLD = 0.2


def _started(run_id: int) -> node_pb2.NodeMessage:
    return node_pb2.NodeMessage(started=node_pb2.RunStarted(run_id=run_id))


def _exited(run_id: int) -> node_pb2.NodeMessage:
    return node_pb2.NodeMessage(exited=node_pb2.RunExited(run_id=run_id))


def _taken_while(first: node_pb2.NodeMessage, then: node_pb2.NodeMessage) -> list[str] | None:
    """The kinds ``take`` returns when ``first`` waits and ``then`` is put on the next turn."""

    async def take() -> list[str] | None:
        outbox = Outbox()
        outbox.put(first)
        asyncio.get_running_loop().call_soon(outbox.put, then)
        taken = await outbox.take(lambda: True, hold_starts=HOLD)
        return None if taken is None else [m.WhichOneof("kind") for m in taken]

    return asyncio.run(take())


def test_a_start_shares_its_write_with_the_exit_that_follows_it():
    assert _taken_while(_started(1), _exited(1)) == ["started", "exited"]


def test_starts_share_their_write_with_the_next_starts():
    assert _taken_while(_started(1), _started(2)) == ["started", "started"]


def test_an_exit_is_taken_without_waiting_for_more():
    assert _taken_while(_exited(1), _started(2)) == ["exited"]


def test_held_starts_stay_queued_when_their_stream_ends_meanwhile():
    async def take_twice() -> tuple[list[node_pb2.NodeMessage] | None, int]:
        outbox = Outbox()
        outbox.put(_started(1))
        current = [True]
        asyncio.get_running_loop().call_soon(current.__setitem__, 0, False)
        ended = await outbox.take(lambda: current[0], hold_starts=HOLD)
        later = await outbox.take(lambda: True)
        return ended, len(later or [])

    ended, left_for_the_next_stream = asyncio.run(take_twice())
    assert ended is None
    assert left_for_the_next_stream == 1
