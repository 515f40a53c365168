"""Every row of a test stack's store, read from outside the service, to show that a request
changed none of them.

The one change a refused request may make is to append audit lines that record the refusal
(outcome ``denied`` or ``failed``): that is the audit log doing its job, not data lost or
changed; and a wrong password counts towards the user's lockout (``NOT_DATA``). Everything
else (every table of the store's models, every other column, the audit lines already written)
must read the same before and after.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from fuzzball_core.store.models import AuditEntry, Base, User

#: the audit outcomes that record a refusal (fuzzball_core.service.audit.OUTCOMES but ``ok``)
REFUSAL_OUTCOMES = ("denied", "failed")

#: columns a refused request may change, by table: failed sign-ins since the last good one and
#: the lockout they lead to are the brute-force defence counting a refused password (sign-in,
#: password change), the way a rate limit counts; no data a person stored
NOT_DATA = {User.__tablename__: ("failed_logins", "locked_until")}


@dataclass(frozen=True)
class StoreRows:
    """Every table's rows, each as its repr, and which audit lines record a refusal."""

    tables: dict[str, frozenset[str]]
    refusal_audit_lines: frozenset[str]


def read_rows(engine: sa.Engine) -> StoreRows:
    """Every row of every table of the store's models, through ``engine``."""
    audit = AuditEntry.__table__
    with engine.connect() as connection:
        tables = {
            table.name: frozenset(repr(tuple(row)) for row in connection.execute(_data_of(table)))
            for table in Base.metadata.sorted_tables
        }
        refusals = connection.execute(sa.select(audit).where(audit.c.outcome.in_(REFUSAL_OUTCOMES)))
        return StoreRows(tables, frozenset(repr(tuple(row)) for row in refusals))


def changes(before: StoreRows, after: StoreRows) -> list[str]:
    """Each row ``after`` lacks or adds against ``before``, as ``TABLE: -ROW`` or ``TABLE:
    +ROW``, but audit lines added that record a refusal."""
    found: list[str] = []
    for table, rows in after.tables.items():
        added = rows - before.tables[table]
        if table == AuditEntry.__tablename__:
            added -= after.refusal_audit_lines
        found += [f"{table}: -{row}" for row in sorted(before.tables[table] - rows)]
        found += [f"{table}: +{row}" for row in sorted(added)]
    return found


def _data_of(table: sa.Table) -> sa.Select[Any]:
    """Every row of ``table``, but the columns ``NOT_DATA`` names."""
    kept = [c for c in table.columns if c.name not in NOT_DATA.get(table.name, ())]
    return sa.select(*kept)
