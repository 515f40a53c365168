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

A workflow may allow an older answer: an image's ``cache-ttl`` is how many seconds a pin may
be reused. The last answer of each key is kept with the time its request began, and a pin
asked with ``reuse_within`` seconds is answered from it, without a request, while that
request began no longer ago (the most recently used :data:`KEPT` keys are kept).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future, wait
from typing import Generic, TypeVar

T = TypeVar("T")

#: keys whose last answer is kept for reuse within a ``cache-ttl``
KEPT = 1024


class PinFlights(Generic[T]):
    """Round trips keyed by what they ask (an image URI), shared by the callers that asked
    for the same key before one began; one round trip of a key runs at a time."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        #: the last answer of each key, and when the request that gave it began
        self._answered: OrderedDict[Hashable, tuple[float, T]] = OrderedDict()
        #: the round trip of each key that has not begun yet, which a newcomer joins
        self._waiting: dict[Hashable, Future[T]] = {}
        #: the round trip of each key under way
        self._running: dict[Hashable, Future[T]] = {}

    def answer(self, key: Hashable, ask: Callable[[], T], reuse_within: float | None = None) -> T:
        """What ``ask()`` returns (or raises), from a call begun after this one was made:
        this caller's own, or one it shares with the others that asked for ``key`` while it
        waited to begin. With ``reuse_within`` seconds, the last answer of ``key`` whose
        call began at most that long ago, when there is one."""
        with self._lock:
            if reuse_within is not None:
                kept = self._answered.get(key)
                if kept is not None and self._clock() - kept[0] <= reuse_within:
                    self._answered.move_to_end(key)
                    return kept[1]
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
        began = self._clock()
        try:
            answer = ask()
        except BaseException as exc:
            self._over(key)
            flight.set_exception(exc)
            raise
        self._over(key, (began, answer))
        flight.set_result(answer)
        return answer

    def _over(self, key: Hashable, answered: tuple[float, T] | None = None) -> None:
        """The round trip of ``key`` under way ended (``answered``: when it began and what
        it answered): the next one may begin. Called before its callers are told, since
        telling them wakes the next one's first caller."""
        with self._lock:
            del self._running[key]
            if answered is not None:
                self._answered[key] = answered
                self._answered.move_to_end(key)
                if len(self._answered) > KEPT:
                    self._answered.popitem(last=False)
