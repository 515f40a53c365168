"""A pulled image written back to the object cache (``images.cache-write-back``).

After a pull stage has the image's EROFS file, the node uploads it to Orchestrate's object
cache at the address the pull payload names, so later ``fuzzball://`` references (and other
nodes) get it from the cluster instead of the registry. The upload is best effort: a failed
attempt is retried with backoff, and the write-back is abandoned when no byte has moved for
``stall`` seconds or the attempts run out. Either way the pull stage itself succeeds.

Every turn is reported through ``report(document)`` as a progress document on the run's
``progress`` stream: ``{"step": "write-back", "done", "total"}`` while bytes move, plus
``"status": "retrying" | "abandoned" | "stored"`` with the reason or the stored digest.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fuzzball_core.backoff import Backoff
from fuzzball_core.drivers import ImageBackend
from fuzzball_core.errors import FuzzballError

#: the progress step every write-back report carries
STEP = "write-back"
#: seconds without progress before a write-back is abandoned, when the node's config is silent
DEFAULT_STALL_SECONDS = 60.0

Report = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class WriteBack:
    """Where a pulled image goes and how patiently."""

    #: the image backend that stores it (the object cache's), reached through the plugins
    store: ImageBackend
    #: the object-cache address: owner, scope, name, definition-hash (and ttl)
    target: Mapping[str, Any]
    stall: float = DEFAULT_STALL_SECONDS

    @property
    def retry(self) -> Backoff:
        """The store's own retry schedule (its attempts bound the write-back's)."""
        return self.store.retry


def write_back(
    image: Path,
    plan: WriteBack,
    report: Report,
    *,
    stopped: Callable[[], bool] = lambda: False,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Upload ``image`` as ``plan`` says; True when stored, False when abandoned (reported).

    Never raises for the upload's sake: the caller's pull has already succeeded.
    """
    total = image.stat().st_size
    address = f"fuzzball://{plan.target.get('scope')}/{plan.target.get('name')}"
    problem = plan.store.store_unavailable()
    if problem is not None:
        abandon(report, total, problem)
        return False
    last_progress = clock()

    def moved(step: str, done: int, size: int) -> None:
        nonlocal last_progress
        last_progress = clock()
        report({"step": STEP, "done": done, "total": size})

    delays = plan.retry.delays()
    attempt = 0
    while True:
        attempt += 1
        try:
            stored = plan.store.store(plan.target, image, progress=moved, timeout=plan.stall)
        except FuzzballError as exc:
            reason = exc.message
        except Exception as exc:  # the upload is best effort whatever went wrong
            reason = f"{type(exc).__name__}: {exc}"
        else:
            digest = str(stored.get("digest", ""))
            report({**_note("stored", total, address=address, digest=digest), "done": total})
            return True
        idle = clock() - last_progress
        if idle >= plan.stall:
            why = f"stalled: no progress for {idle:.0f}s (limit {plan.stall:g}s)"
            abandon(report, total, f"{why}: {reason}")
            return False
        delay = next(delays, None)
        if delay is None or stopped():
            why = "the run was stopped" if stopped() else f"gave up after {attempt} attempts"
            abandon(report, total, f"{why}: {reason}")
            return False
        report(_note("retrying", total, attempt=attempt, delay=delay, reason=reason))
        sleep(delay)


def abandon(report: Report, total: int, reason: str) -> None:
    """Report the write-back of an image of ``total`` bytes abandoned, saying why."""
    report(_note("abandoned", total, reason=reason))


def _note(status: str, total: int, **details: Any) -> dict[str, Any]:
    return {"step": STEP, "done": 0, "total": total, "status": status, **details}
