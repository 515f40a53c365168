"""Exponential backoff, the one schedule every retry loop in the project follows.

A node reconnecting to Orchestrate, an image backend waiting out an unreachable registry and a
write-back waiting for the object cache all wait the same way: the first delay, then each one
``factor`` times the last up to ``maximum``, optionally spread by ``jitter`` so that many nodes
restarted together do not knock on Orchestrate in step.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    """A backoff schedule.

    ``attempts`` counts the first try, so a schedule of ``attempts`` tries has one fewer delay;
    ``None`` means retry for ever (the caller decides when to stop). ``jitter`` is the fraction
    each delay may move either way (0.2: between 80 % and 120 % of the nominal delay).
    """

    initial: float = 0.25
    factor: float = 2.0
    maximum: float = 4.0
    attempts: int | None = None
    jitter: float = 0.0

    def __post_init__(self) -> None:
        if self.initial < 0 or self.maximum < self.initial:
            raise ValueError(f"backoff needs 0 <= initial <= maximum, got {self}")
        if self.factor < 1:
            raise ValueError(f"backoff factor must be at least 1, got {self.factor}")
        if not 0 <= self.jitter < 1:
            raise ValueError(f"backoff jitter must be in [0, 1), got {self.jitter}")

    def nominal(self) -> Iterator[float]:
        """The delays before each retry, without jitter (endless when ``attempts`` is None)."""
        delay = self.initial
        retries = None if self.attempts is None else max(self.attempts - 1, 0)
        count = 0
        while retries is None or count < retries:
            yield delay
            count += 1
            delay = min(delay * self.factor, self.maximum)

    def delays(self) -> Iterator[float]:
        """The delays to sleep before each retry, jitter applied."""
        for delay in self.nominal():
            if self.jitter:
                delay *= random.uniform(1 - self.jitter, 1 + self.jitter)
            yield delay
