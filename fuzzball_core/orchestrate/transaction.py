"""One engine pass as a unit of work, and the statuses runs and nodes move through.

Every change the engine makes happens inside a :class:`Transaction`: its session, the
messages for nodes and the events for hooks that leave only once the session commits.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.service.views import STARTED
from fuzzball_core.store.models import Run

#: Run statuses beyond the stage ones: placed and sent to a node, not yet running.
ASSIGNED = "ASSIGNED"
LIVE_RUN = (ASSIGNED, STARTED)
#: Node statuses.
READY = "READY"
OFFLINE = "OFFLINE"
DEPROVISIONED = "DEPROVISIONED"


@dataclass
class Transaction:
    """One engine pass's session, plus what to send and announce once it commits."""

    session: Session
    now: float
    outbox: list[tuple[str, node_pb2.ControlMessage]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    #: rows loaded in bulk ahead of use: the session's identity map holds rows weakly, so
    #: without these references they would be dropped and loaded again one by one
    loaded: list[Any] = field(default_factory=list)

    def load(self, model: type, ids: Iterable[Any]) -> None:
        """Load the rows of ``model`` with these primary keys into the session, at once."""
        wanted = set(ids)
        if wanted:
            key = model.__mapper__.primary_key[0]
            self.loaded.extend(self.session.scalars(select(model).where(key.in_(wanted))))


def task_label(run: Run) -> str:
    """`` task N`` for a task of an array, nothing otherwise (for event messages)."""
    return f" task {run.task_id}" if run.task_id is not None else ""
