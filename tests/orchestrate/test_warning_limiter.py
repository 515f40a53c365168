"""A warning limiter lets a key's first warning through and at most one a window after it,
counting those held back; it remembers a bounded number of keys."""

from __future__ import annotations

import pytest

from fuzzball_core.orchestrate.warning_limiter import Admitted, WarningLimiter


def test_a_key_beyond_its_capacity_forgets_the_key_let_through_longest_ago() -> None:
    limiter: WarningLimiter[str] = WarningLimiter(window=60, capacity=2)
    limiter.admit("old", 0)
    limiter.admit("recent", 1)
    limiter.admit("old", 70)  # let through again: now the most recent
    limiter.admit("new", 71)
    assert len(limiter) == 2
    assert limiter.admit("old", 72) is None  # still remembered, within its window
    assert limiter.admit("recent", 73) == Admitted(held_back=0, since=73)  # forgotten


def test_a_clock_set_back_opens_a_new_window() -> None:
    limiter: WarningLimiter[str] = WarningLimiter(window=60, capacity=2)
    limiter.admit("node", 1000)
    limiter.admit("node", 1001)
    assert limiter.admit("node", 500) == Admitted(held_back=1, since=1000)


@pytest.mark.parametrize(("window", "capacity"), [(0, 1), (60, 0)])
def test_a_limiter_without_a_window_or_room_is_refused(window: float, capacity: int) -> None:
    with pytest.raises(ValueError, match="positive window and capacity"):
        WarningLimiter(window=window, capacity=capacity)
