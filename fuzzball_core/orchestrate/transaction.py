"""One unit of the engine's work: a database session and what leaves once it commits.

Every change the engine makes happens inside a :class:`Transaction`: its session, the
messages for nodes and the events for hooks that leave only once the session commits.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from fuzzball_core.orchestrate.messages import ToNode
from fuzzball_core.store.models import Run, Stage, Workflow


@dataclass
class Transaction:
    """One engine pass's session, plus what to send and announce once it commits."""

    session: Session
    now: float
    outbox: list[tuple[str, ToNode]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    #: rows loaded in bulk ahead of use: the session's identity map holds rows weakly, so
    #: without these references they would be dropped and loaded again one by one
    loaded: list[Any] = field(default_factory=list)

    def load(self, model: type, ids: Iterable[Any]) -> None:
        """Load the rows of ``model`` with these primary keys into the session, at once."""
        wanted = set(ids)
        if wanted:
            key = model.__mapper__.primary_key[0]  # type: ignore[attr-defined]
            self.loaded.extend(self.session.scalars(select(model).where(key.in_(wanted))))

    def load_runs(self, run_ids: Iterable[int]) -> None:
        """Load these runs with their stages and workflows in one joined query (a pass that
        applies reports needs all three; three queries cost three round trips)."""
        wanted = set(run_ids)
        if wanted:
            rows = self.session.execute(
                select(Run, Stage, Workflow)
                .join(Stage, Stage.id == Run.stage_id)
                .join(Workflow, Workflow.id == Run.workflow_id)
                .where(Run.id.in_(wanted))
            )
            self.loaded.extend(row for triple in rows for row in triple)

    def send(self, node_ids: Iterable[str], message: ToNode) -> None:
        """Send ``message`` to each of ``node_ids`` once the transaction commits."""
        self.outbox.extend((node_id, message) for node_id in node_ids)


def task_label(run: Run) -> str:
    """`` task N`` for a task of an array, nothing otherwise (for event messages)."""
    return f" task {run.task_id}" if run.task_id is not None else ""
