"""Pins of one image asked for at once share one registry round trip.

Submissions are prepared in worker threads, several at a time; a burst of workflows using
the same image (2,000 separate workflows of one job each) pinned it once per workflow, each
pin a registry request: about a tenth of Orchestrate's samples in that burst. Here a pin
asked for while another of the same key waits to begin joins that one; once a round trip
has begun, a newcomer waits for the next one, which begins after it ended. So every answer
comes from a request sent after the pin was asked for: a tag moved just before a submission
(pushed, then submitted) is never answered with what the registry said before. Pins with a
registry secret share only with pins holding the same credentials (a flight's key holds
their fingerprint, ``fuzzball_core.credentials_fingerprints``): what one holder of a secret
may read, every holder may.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from concurrent.futures import Future, wait
from typing import Generic, TypeVar

T = TypeVar("T")


class PinFlights(Generic[T]):
    """Round trips keyed by what they ask (an image URI), shared by the callers that asked
    for the same key before one began; one round trip of a key runs at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: the round trip of each key that has not begun yet, which a newcomer joins
        self._waiting: dict[Hashable, Future[T]] = {}
        #: the round trip of each key under way
        self._running: dict[Hashable, Future[T]] = {}

    def answer(self, key: Hashable, ask: Callable[[], T]) -> T:
        """What ``ask()`` returns (or raises), from a call begun after this one was made:
        this caller's own, or one it shares with the others that asked for ``key`` while it
        waited to begin."""
        with self._lock:
            joined = self._waiting.get(key)
            if joined is None:
                flight = self._waiting[key] = Future()
                before = self._running.get(key)
        if joined is not None:
            return joined.result()  # asked for before it began
        if before is not None:
            wait([before])  # the round trip under way began before this call: not ours
        with self._lock:
            del self._waiting[key]  # from now on a newcomer waits for the next one
            self._running[key] = flight
        try:
            answer = ask()
        except BaseException as exc:
            self._over(key)
            flight.set_exception(exc)
            raise
        self._over(key)
        flight.set_result(answer)
        return answer

    def _over(self, key: Hashable) -> None:
        """The round trip of ``key`` under way ended: the next one may begin. Called before
        its callers are told, since telling them wakes the next one's first caller."""
        with self._lock:
            del self._running[key]
