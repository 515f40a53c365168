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
        self._waiting: list[tuple[C, asyncio.Future[Any]]] = []
        #: how many batches were applied, and how many changes they held
        self.batches = 0
        self.applied = 0

    def add(self, change: C) -> asyncio.Future[Any]:
        """Apply ``change`` with the others of this turn of the loop; its answer, later."""
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[Any] = loop.create_future()
        if not self._waiting:
            # after what the loop has ready now: the changes read off the wire meanwhile
            # join this batch
            loop.call_soon(self._apply)
        self._waiting.append((change, answer))
        return answer

    def apply_waiting(self) -> None:
        """Apply every change waiting now, without waiting for the loop's turn (for work
        that should see them, such as the engine's next pass)."""
        while self._waiting:
            self._apply_batch()

    def _apply(self) -> None:
        if not self._waiting:
            return  # applied before their turn came (:meth:`apply_waiting`)
        self._apply_batch()
        if self._waiting:
            asyncio.get_running_loop().call_soon(self._apply)  # the rest, after other work

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
