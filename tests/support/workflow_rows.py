"""Many stored workflows at once, for listing tests and bench/ui.py.

Submitting 10,000 workflows through the engine would take minutes and test nothing the
listing depends on, so :func:`add_workflows` writes the rows a submission leaves behind (a
workflow row, no stages) in one bulk insert.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import insert
from sqlalchemy.orm import Session, sessionmaker

from fuzzball_core.store.models import Workflow
from fuzzball_core.vocabulary import Status

#: the statuses the rows cycle through
STATUSES: Sequence[str] = (
    Status.FINISHED,
    Status.STARTED,
    Status.PENDING,
    Status.FAILED,
    Status.CANCELED,
)
HELLO = "version: v1\njobs:\n  hello:\n    image:\n      uri: docker://alpine\n"


@dataclass(frozen=True)
class Row:
    """What a test needs to know of a row it added."""

    id: str
    name: str
    status: str
    created_at: float
    started_at: float | None


def add_workflows(
    sessions: sessionmaker[Session],
    account_id: str,
    count: int,
    *,
    start: float = 1_700_000_000.0,
    prefix: str = "wf",
) -> list[Row]:
    """Store ``count`` workflows of ``account_id``: the i-th submitted at ``start + i``,
    named ``PREFIX-i``, statuses cycling through :data:`STATUSES`; a PENDING one never
    started, the others started at a time that is not in submission order (so the two
    orders differ)."""
    rows = []
    for i in range(count):
        status = STATUSES[i % len(STATUSES)]
        started = None if status == Status.PENDING else start + (i * 7919) % count
        rows.append(Row(str(uuid.uuid4()), f"{prefix}-{i}", status, start + i, started))
    with sessions.begin() as session:
        session.execute(
            insert(Workflow),
            [
                {
                    "id": r.id,
                    "account_id": account_id,
                    "name": r.name,
                    "status": r.status,
                    "raw_specification": HELLO,
                    "definition_v4": HELLO,
                    "error": "",
                    "created_at": r.created_at,
                    "started_at": r.started_at,
                    "finished_at": None,
                }
                for r in rows
            ],
        )
    return rows
