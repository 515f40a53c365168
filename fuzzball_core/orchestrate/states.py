"""The state machine of workflows, stages and runs.

Workflows and stages move ``PENDING -> STARTED -> FINISHED | FAILED | CANCELED`` (a stage
may also end straight from PENDING: skipped, stopped, or a volume or cached image build that
needs no run). A run is one attempt at a stage (or one task of an array): ``PENDING`` until
the scheduler places it, ``ASSIGNED`` once sent to its nodes, ``STARTED`` when a node
reports its container running, then ended. Nothing leaves an ended status.

:func:`transition` is the one way statuses change: it checks the move against the tables
below, stamps the row's times and records the move's event. A move the tables do not allow
is a bug in the engine, so it raises :class:`IllegalTransition` (and the pass fails and is
replayed) rather than writing a status history no reader expects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fuzzball_core.orchestrate import events
from fuzzball_core.orchestrate.transaction import Transaction
from fuzzball_core.store.models import Run, Stage, Workflow
from fuzzball_core.vocabulary import TERMINAL_STATUSES, EventKind, NodeStatus, Status

#: A run placed and sent to its nodes, not yet reported running (runs only).
ASSIGNED = "ASSIGNED"
#: Run statuses that hold nodes.
LIVE_RUN = (ASSIGNED, Status.STARTED)
#: Run statuses not yet ended.
OPEN_RUN = (Status.PENDING, *LIVE_RUN)

_ENDED = frozenset(TERMINAL_STATUSES)


class IllegalTransition(RuntimeError):
    """The engine tried a status change its state machine does not allow (a bug)."""


@dataclass(frozen=True)
class Machine:
    """The allowed moves of one kind of row, and the event each move records."""

    name: str
    moves: Mapping[str, frozenset[str]]
    #: event by (from, to); a move not listed records no event of its own
    events: Mapping[tuple[str, str], EventKind]

    def check(self, current: str, target: str) -> None:
        """Raise :class:`IllegalTransition` unless ``current -> target`` is allowed."""
        if target not in self.moves.get(current, frozenset()):
            raise IllegalTransition(f"{self.name} cannot move from {current} to {target}")


def _ending(sources: tuple[str, ...], kinds: Mapping[str, EventKind]) -> dict:
    return {(source, status): kind for source in sources for status, kind in kinds.items()}


WORKFLOW = Machine(
    "workflow",
    moves={
        Status.PENDING: frozenset({Status.STARTED, *_ENDED}),
        Status.STARTED: _ENDED,
    },
    events={
        (Status.PENDING, Status.STARTED): EventKind.WORKFLOW_STARTED,
        **_ending(
            (Status.PENDING, Status.STARTED),
            {
                Status.FINISHED: EventKind.WORKFLOW_FINISHED,
                Status.FAILED: EventKind.WORKFLOW_FAILED,
                Status.CANCELED: EventKind.WORKFLOW_CANCELED,
            },
        ),
    },
)

STAGE = Machine(
    "stage",
    moves={
        Status.PENDING: frozenset({Status.STARTED, *_ENDED}),
        Status.STARTED: _ENDED,
    },
    events={
        (Status.PENDING, Status.STARTED): EventKind.STAGE_STARTED,
        **_ending(
            (Status.PENDING, Status.STARTED),
            {
                Status.FINISHED: EventKind.STAGE_FINISHED,
                Status.FAILED: EventKind.STAGE_FAILED,
                Status.CANCELED: EventKind.STAGE_CANCELED,
            },
        ),
    },
)

RUN = Machine(
    "run",
    moves={
        # a run never placed is only ever canceled (its stage or workflow ended)
        Status.PENDING: frozenset({ASSIGNED, Status.CANCELED}),
        ASSIGNED: frozenset({Status.STARTED, *_ENDED}),
        Status.STARTED: _ENDED,
    },
    events={
        (Status.PENDING, ASSIGNED): EventKind.SCHEDULED,
        **_ending(
            LIVE_RUN,
            {status: EventKind.CONTAINER_EXITED for status in _ENDED},
        ),
    },
)

#: Node statuses, for the queries that select nodes by them.
READY = NodeStatus.READY
OFFLINE = NodeStatus.OFFLINE
DEPROVISIONED = NodeStatus.DEPROVISIONED


def _machine(row: Workflow | Stage | Run) -> Machine:
    if isinstance(row, Run):
        return RUN
    if isinstance(row, Stage):
        return STAGE
    return WORKFLOW


def transition(
    tx: Transaction,
    row: Workflow | Stage | Run,
    target: str,
    event_message: str = "",
    *,
    when: float | None = None,
    stage_name: str | None = None,
    node_id: str | None = None,
    **data: Any,
) -> None:
    """Move ``row`` to ``target`` and record the move's event, if it has one.

    ``when`` (default: the transaction's time) becomes the row's ``started_at`` on STARTED,
    ``assigned_at`` on ASSIGNED and ``finished_at`` on an ending. The event is filed under
    the row's workflow and ``stage_name`` (a stage's own name by default), with ``node_id``
    and ``data``. Raises :class:`IllegalTransition` for a move the machine does not allow.
    """
    machine = _machine(row)
    current = row.status
    machine.check(current, target)
    row.status = target
    stamp = when if when is not None else tx.now
    column = _STAMPED.get(target)
    if column is not None:
        assert column != "assigned_at" or isinstance(row, Run)
        setattr(row, column, stamp)
    if target in _ENDED:
        # an end's columns (with what was set beside them: exit codes, messages) go out
        # with the pass's other ends in one UPDATE per table, not through the ORM's flush,
        # whose unit of work cost more than the rows' UPDATEs (three rows a workflow)
        tx.write_changed(row)
    if isinstance(row, Workflow):
        workflow_id = row.id
    else:
        workflow_id = row.workflow_id
        if isinstance(row, Stage):
            stage_name = stage_name or row.name
    _record_move(
        tx, machine, current, target, event_message, workflow_id, stage_name, node_id, data
    )


def run_moved(
    tx: Transaction,
    run_id: int,
    workflow_id: str,
    current: str,
    target: str,
    event_message: str = "",
    *,
    when: float | None = None,
    stage_name: str | None = None,
    node_id: str | None = None,
    **data: Any,
) -> None:
    """:func:`transition` for a run whose row the session does not hold, known to be in
    ``current`` (the engine's :class:`~fuzzball_core.orchestrate.context.LiveRun`): the same
    check, columns and event, the row written without being read
    (:meth:`~fuzzball_core.orchestrate.transaction.Transaction.write_run`)."""
    RUN.check(current, target)
    values: dict[str, Any] = {"status": target}
    column = _STAMPED.get(target)
    if column is not None:
        values[column] = when if when is not None else tx.now
    tx.write_run(run_id, **values)
    _record_move(tx, RUN, current, target, event_message, workflow_id, stage_name, node_id, data)


#: The time column each status stamps (``when`` the move happened).
_STAMPED: dict[str, str] = {
    Status.STARTED: "started_at",
    ASSIGNED: "assigned_at",
    **dict.fromkeys(_ENDED, "finished_at"),
}


def _record_move(
    tx: Transaction,
    machine: Machine,
    current: str,
    target: str,
    message: str,
    workflow_id: str,
    stage_name: str | None,
    node_id: str | None,
    data: dict[str, Any],
) -> None:
    """Record the event of the move, if it has one."""
    kind = machine.events.get((current, target))
    if kind is not None:
        events.record(
            tx,
            kind,
            message,
            workflow_id=workflow_id,
            stage_name=stage_name,
            node_id=node_id,
            **data,
        )
