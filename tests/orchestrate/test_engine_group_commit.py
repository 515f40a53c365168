"""Group commit: after an expensive pass the engine lets reports gather before the next one;
after a cheap pass it does not wait."""

from __future__ import annotations

import asyncio

from fuzzball_core.orchestrate import engine as engine_module
from fuzzball_core.orchestrate.engine import GATHER_FLOOR, GATHER_MAX


def _gathers_after_passes_costing(harness, monkeypatch, costs: list[float]) -> list[float]:
    """The waits before each of ``len(costs) + 1`` turns whose passes cost ``costs`` CPU
    seconds in turn (the loop's sleeps of zero or more; the engine's clock is faked)."""
    engine = harness.engine
    cpu = iter(t for cost in [*costs, 0.0] for t in (0.0, cost))
    monkeypatch.setattr(engine_module.time, "thread_time", lambda: next(cpu))
    monkeypatch.setattr(engine, "step", lambda: None)
    waits: list[float] = []
    sleep = asyncio.sleep

    async def recorded(delay: float, *args, **kwargs):
        waits.append(delay)
        await sleep(0)

    monkeypatch.setattr(engine_module.asyncio, "sleep", recorded)

    async def turns() -> None:
        for _ in range(len(costs) + 1):
            engine.wake()
            await engine._turn(tick=60.0)

    asyncio.run(turns())
    return waits


def test_a_pass_costing_more_than_the_floor_makes_the_next_wait_as_long(harness, monkeypatch):
    cost = 2 * GATHER_FLOOR
    assert _gathers_after_passes_costing(harness, monkeypatch, [cost]) == [0.0, cost]


def test_cheap_passes_never_wait_and_expensive_ones_wait_at_most_the_maximum(harness, monkeypatch):
    costs = [GATHER_FLOOR / 2, 10 * GATHER_MAX]
    assert _gathers_after_passes_costing(harness, monkeypatch, costs) == [0.0, 0.0, GATHER_MAX]
