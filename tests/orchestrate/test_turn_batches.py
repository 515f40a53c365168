"""Changes reaching the loop over several turns of a wave (thousands of nodes reconnecting,
gRPC's server taking one call a turn) are applied together when the batches gather; a lone
change on a quiet loop, and a whole batch, are applied without waiting."""

from __future__ import annotations

import asyncio
from typing import Any

from fuzzball_core.orchestrate.turn_batches import TurnBatches


def batches(applied: list[list[str]], *, gather: float, max_batch: int = 64) -> TurnBatches[str]:
    """Batches whose transactions record what each applied, answering each change with
    itself."""

    def together(_tx: Any, changes: list[str]) -> list[str]:
        applied.append(list(changes))
        return list(changes)

    def alone(_tx: Any, change: str) -> str:
        applied.append([change])
        return change

    return TurnBatches(
        lambda work: work(None), together, alone, max_batch=max_batch, what="t", gather=gather
    )


async def _over_turns(waiting: TurnBatches[str], changes: str) -> list[str]:
    """Add ``changes`` one a turn of the loop, as gRPC's server hands over its calls."""
    answers = [waiting.add(changes[0])]
    for change in changes[1:]:
        await asyncio.sleep(0)
        answers.append(waiting.add(change))
    return list(await asyncio.gather(*answers))


def test_changes_arriving_over_several_turns_of_a_wave_are_applied_together():
    applied: list[list[str]] = []
    waiting = batches(applied, gather=0.05)

    async def main() -> list[str]:
        await waiting.add("first")  # the wave's first change
        return await _over_turns(waiting, "abc")

    assert asyncio.run(main()) == ["a", "b", "c"]
    assert applied == [["first"], ["a", "b", "c"]]


def test_a_lone_change_on_a_quiet_loop_is_applied_without_waiting():
    applied: list[list[str]] = []
    waiting = batches(applied, gather=30.0)

    async def main() -> str:
        return await asyncio.wait_for(waiting.add("x"), 5)

    assert asyncio.run(main()) == "x"


def test_a_whole_batch_waiting_is_applied_without_waiting_out_the_gathering():
    applied: list[list[str]] = []
    waiting = batches(applied, gather=30.0, max_batch=2)

    async def main() -> list[str]:
        await waiting.add("first")
        return await asyncio.wait_for(_over_turns(waiting, "ab"), 5)

    assert asyncio.run(main()) == ["a", "b"]
    assert applied == [["first"], ["a", "b"]]
