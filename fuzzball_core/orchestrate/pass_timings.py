"""How long the engine's passes and the scheduler's decisions take, for Orchestrate's
metrics (``fuzzball_engine_pass_seconds``, ``fuzzball_scheduler_decision_seconds``: counts
and sums, as Prometheus summaries are read with ``rate(sum) / rate(count)``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class Timed:
    """How many times something took how long in all, and the last one."""

    count: int = 0
    seconds: float = 0.0
    last: float = 0.0

    def add(self, seconds: float) -> None:
        """Count one more that took ``seconds``."""
        self.count += 1
        self.seconds += seconds
        self.last = seconds


@dataclass
class PassTimings:
    """The engine's passes (that committed) and the scheduler's decisions within them."""

    passes: Timed
    decisions: Timed

    def __init__(self) -> None:
        self.passes, self.decisions = Timed(), Timed()

    @contextmanager
    def deciding(self) -> Iterator[None]:
        """Time one scheduler decision (a pass's placement step)."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self.decisions.add(time.perf_counter() - started)
