"""The rows of live workflows kept from one transaction to the next.

Each pass is a session of its own, so a workflow's row and its stages' rows were read again
in each pass that touched it: its submission's, its run's placement, its start and its
exit (about an eighth of Orchestrate's samples under 4,000 separate workflows). The engine
is their only writer, and writes them through these same rows (an ORM change or
:meth:`~fuzzball_core.orchestrate.transaction.Transaction.write_changed`), so the rows a
committed transaction read with all of a workflow's stages are kept, as committed, and the
next transaction that needs them attaches them to its session instead of reading them.

They are dropped when their workflow ends, when a transaction reads any of them from the
store anew (a change that fetched its own copy, with :meth:`Session.get` or a query:
cancel, a hold's eviction, a PATCH), and all of them when a transaction they were lent to
did not commit (its changes to them were never stored) or the engine rebuilds its view.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import event, inspect
from sqlalchemy.orm import Session

from fuzzball_core.store.database import row_key
from fuzzball_core.store.models import Stage, Workflow
from fuzzball_core.vocabulary import TERMINAL_STATUSES

#: Where a session notes the workflows whose rows it read from the store
#: (``Session.info``), for :meth:`LiveRows.committed`.
_READ = "fuzzball.live_rows_read"


class LiveRows:
    """Live workflows' rows (the workflow's and all its stages'), by workflow id, between
    transactions."""

    def __init__(self) -> None:
        #: each workflow's rows, and their identity keys (worked out once)
        self._rows: dict[str, tuple[Workflow, list[Stage], tuple[Any, ...]]] = {}
        self._workflow_of_stage: dict[int, str] = {}
        #: the session holding rows lent to it and not yet committed
        self._lent_to: Session | None = None

    def __len__(self) -> int:
        return len(self._rows)

    def clear(self) -> None:
        """Forget every kept row."""
        self._rows.clear()
        self._workflow_of_stage.clear()
        self._lent_to = None

    def watch(self, session: Session) -> None:
        """Note, in ``session``, the workflows whose rows it reads from the store (their
        kept rows go stale if it changes its own copies)."""
        session.info.setdefault(_READ, set())

    def attach(self, session: Session, workflow_ids: Iterable[str]) -> dict[str, list[Stage]]:
        """Attach to ``session`` the kept rows of these workflows; their stage rows by
        workflow id (those not kept, or whose rows the session holds already, are absent).
        Rows still lent to another session, which did not commit, are all dropped first."""
        if self._lent_to is not session:
            if self._lent_to is not None:
                self.clear()  # that transaction failed: its rows may hold what was never stored
            self._lent_to = session
        self.watch(session)
        attached: dict[str, list[Stage]] = {}
        held = session.identity_map
        for workflow_id in workflow_ids:
            kept = self._rows.get(workflow_id)
            if kept is None:
                continue
            workflow, stages, keys = kept
            if any(key in held for key in keys):
                continue  # read anew in this session: it drops them as it commits
            session.add(workflow)
            for stage in stages:
                session.add(stage)
            attached[workflow_id] = stages
        return attached

    def workflows_of(self, stage_ids: Iterable[int]) -> set[str]:
        """The kept workflows these stages belong to."""
        of = self._workflow_of_stage
        return {of[stage_id] for stage_id in stage_ids if stage_id in of}

    def committed(self, session: Session, stages: dict[str, list[Stage]]) -> None:
        """``session`` committed: drop the kept rows of the workflows it read anew or that
        ended, and keep those of the live workflows it holds with all their ``stages``."""
        if self._lent_to is session:
            self._lent_to = None
        for workflow_id in session.info.pop(_READ, ()):
            self._drop(workflow_id)
        held = session.identity_map
        for workflow_id, rows in stages.items():
            workflow = held.get(row_key(Workflow, workflow_id))
            if workflow is None or workflow.status in TERMINAL_STATUSES:
                self._drop(workflow_id)
                continue
            if workflow_id not in self._rows:
                keys = (inspect(workflow).key, *(inspect(stage).key for stage in rows))
                self._rows[workflow_id] = (workflow, list(rows), keys)
                for stage in rows:
                    self._workflow_of_stage[stage.id] = workflow_id

    def _drop(self, workflow_id: str) -> None:
        kept = self._rows.pop(workflow_id, None)
        if kept is not None:
            for stage in kept[1]:
                self._workflow_of_stage.pop(stage.id, None)


def _read(row: Workflow | Stage, workflow_id: str, context: Any) -> None:
    """A row of ``workflow_id`` came from the store into a watched session."""
    session = context.session
    if session is not None:
        read = session.info.get(_READ)
        if read is not None:
            read.add(workflow_id)


@event.listens_for(Workflow, "load")
def _workflow_read(row: Workflow, context: Any) -> None:
    _read(row, row.id, context)


@event.listens_for(Stage, "load")
def _stage_read(row: Stage, context: Any) -> None:
    _read(row, row.workflow_id, context)
