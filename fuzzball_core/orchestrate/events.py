"""Recording events: into the event log inside the transaction, to hooks after it commits.

Every event the engine records is one of :class:`~fuzzball_core.vocabulary.EventKind`; the
log row and the ``fuzzball_event`` hook call carry the same fields.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from fuzzball_core.orchestrate.transaction import Transaction
from fuzzball_core.vocabulary import EventKind

log = logging.getLogger(__name__)

#: What the engine calls with each event once its transaction committed.
EventHook = Callable[[dict[str, Any]], None]


def record(
    tx: Transaction,
    kind: EventKind,
    message: str = "",
    *,
    workflow_id: str | None = None,
    stage_name: str | None = None,
    node_id: str | None = None,
    **data: Any,
) -> None:
    """Queue an event for the log (written in one statement as the transaction commits,
    :meth:`~fuzzball_core.orchestrate.transaction.Transaction.commit`) and for the hooks."""
    value = str(kind)  # the plain string: hooks and JSON see the public value, not the enum
    tx.events.append(
        {
            "kind": value,
            "time": tx.now,
            "workflow_id": workflow_id,
            "stage": stage_name,
            "node_id": node_id,
            "message": message,
            "data": data,
        }
    )


def announce(events: Iterable[dict[str, Any]], hook: EventHook | None) -> None:
    """Pass committed events to the hook; a plugin's failure must not touch the workflow."""
    if hook is None:
        return
    for event in events:
        try:
            hook(event)
        except Exception:
            log.exception("event hook failed for %s", event["kind"])
