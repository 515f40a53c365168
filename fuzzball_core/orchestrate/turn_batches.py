"""Changes that reach the event loop in one turn, applied together in one transaction.

Requests that each change the store (a node's Register, a workflow's submission) arrive at
Orchestrate's one event loop in bursts: hundreds of nodes coming back to a restarted
Orchestrate, thousands of workflows submitted at once. Applied one by one, each is a
transaction of its own (the pool's checkout, BEGIN, its statements, COMMIT), and those
fixed costs are most of a small change's. :class:`TurnBatches` holds each change until
the loop's next turn, after what the loop had ready (the requests read off the wire
meanwhile), and applies the ones waiting then in one transaction. A lone change on a quiet
loop waits for nothing but that turn: a batch of one, the transaction it had before.

If a batch's transaction fails (one change refused, a fault), nothing of it happened, and
each change is applied again alone, so that one change's refusal is its own answer.

A wave of changes (thousands of nodes reconnecting after a flap) would otherwise still be
applied one by one: gRPC's asyncio server takes one call off its queue per turn of the loop,
so the first change of a turn is applied before the next call is even read, each in a
transaction of its own, and calls queued in gRPC's core longer than its 30 s are cancelled
and tried again by their nodes. With ``gather`` (seconds), a change arriving while a wave goes
on (a batch applied within :data:`WAVE` seconds) waits that long for the others, or until a
whole batch waits: the loop takes more calls meanwhile and applies them together.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from fuzzball_core.orchestrate.transaction import Transaction

log = logging.getLogger(__name__)

#: One waiting change, as the caller describes it.
C = TypeVar("C")

#: How the engine runs one transaction and publishes it (``Engine.change``).
Change = Callable[[Callable[[Transaction], Any]], Any]

#: Seconds since the last batch within which a new change is part of a wave (and waits
#: ``gather`` for the others); a change arriving later on a quiet loop is applied at once.
WAVE = 1.0


class TurnBatches(Generic[C]):
    """The changes waiting for the event loop's next turn.

    ``together(tx, changes)`` applies several in ``tx`` and returns each one's answer in
    turn; ``alone(tx, change)`` applies one and returns its answer.
    """

    def __init__(
        self,
        change: Change,
        together: Callable[[Transaction, list[C]], list[Any]],
        alone: Callable[[Transaction, C], Any],
        *,
        max_batch: int,
        what: str,
        gather: float = 0.0,
    ) -> None:
        self._change = change
        self._together = together
        self._alone = alone
        #: the most changes one transaction applies; the rest wait for the loop's next turn
        #: (a batch holds the loop while it runs, and the rest of Orchestrate gets its
        #: turns between batches)
        self.max_batch = max_batch
        #: what the changes are, for the log
        self._what = what
        #: seconds a change arriving during a wave waits for others to join its batch
        self.gather = gather
        self._waiting: list[tuple[C, asyncio.Future[Any]]] = []
        #: the scheduled application of the changes waiting, if any
        self._due: asyncio.Handle | None = None
        #: the loop's time when the last batch was applied
        self._last_batch = float("-inf")
        #: how many batches were applied, and how many changes they held
        self.batches = 0
        self.applied = 0

    def add(self, change: C) -> asyncio.Future[Any]:
        """Apply ``change`` with the others of this turn of the loop; its answer, later."""
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[Any] = loop.create_future()
        self._waiting.append((change, answer))
        if self._due is None:
            self._schedule(loop)
        elif len(self._waiting) == self.max_batch:
            self._due.cancel()  # a whole batch waits: nothing more to gather
            self._schedule(loop)
        return answer

    def _schedule(self, loop: asyncio.AbstractEventLoop) -> None:
        """Apply the changes waiting after what the loop has ready now (the changes read off
        the wire meanwhile join them), or, in a wave and short of a whole batch, after
        :attr:`gather` seconds."""
        wave = loop.time() - self._last_batch < WAVE
        if self.gather and wave and len(self._waiting) < self.max_batch:
            self._due = loop.call_later(self.gather, self._apply)
        else:
            self._due = loop.call_soon(self._apply)

    def apply_waiting(self) -> None:
        """Apply every change waiting now, without waiting for the loop's turn (for work
        that should see them, such as the engine's next pass)."""
        if self._due is not None:
            self._due.cancel()
            self._due = None
        while self._waiting:
            self._apply_batch()

    def _apply(self) -> None:
        self._due = None
        if not self._waiting:
            return  # applied before their turn came (:meth:`apply_waiting`)
        self._apply_batch()
        loop = asyncio.get_running_loop()
        self._last_batch = loop.time()
        if self._waiting:
            self._schedule(loop)  # the rest, after other work

    def _apply_batch(self) -> None:
        """Apply the first :attr:`max_batch` changes waiting, together when there are
        several, each alone when that fails."""
        batch, self._waiting = self._waiting[: self.max_batch], self._waiting[self.max_batch :]
        self.batches += 1
        self.applied += len(batch)
        if len(batch) > 1:
            changes = [change for change, _ in batch]
            try:
                answers = self._change(lambda tx: self._together(tx, changes))
            except Exception as exc:  # each is tried alone below, and answered for itself
                log.info("%d %s failed together (%s); each alone", len(batch), self._what, exc)
            else:
                for (_, future), answer in zip(batch, answers, strict=True):
                    _answer(future, answer)
                return
        for change, future in batch:
            try:
                answer = self._change(_applying(self._alone, change))
            except Exception as exc:  # the change's own caller answers with it
                _answer(future, error=exc)
            else:
                _answer(future, answer)


def _applying(alone: Callable[[Transaction, C], Any], change: C) -> Callable[[Transaction], Any]:
    """The unit of work applying ``change`` alone."""
    return lambda tx: alone(tx, change)


def _answer(
    future: asyncio.Future[Any], answer: Any = None, error: Exception | None = None
) -> None:
    """Settle a change's future, unless its caller has gone (a cancelled request)."""
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(answer)
