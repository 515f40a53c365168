"""Whose work the runs on nodes are, for node views: read from the store, kept between lists.

A node's view names each run the scheduler holds on it as ``<workflow id>/<stage name>``
(``/<task>`` for an array's task), or as ``IN_USE`` to a caller who may not see its workflow.
What a run is part of never changes once it is stored, so :class:`RunOwners` keeps what it
read of the runs looked up last and reads only the runs new since: a node list of 500 busy
nodes read 500 runs through an ``IN`` list of 500 bound parameters each time (a third of its
CPU), while between two lists a second apart most of those runs are still running.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import NamedTuple

from sqlalchemy import any_, bindparam, select
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session
from sqlalchemy.types import Integer

from fuzzball_core.store.models import Account, Run, Stage, Workflow

#: run ids a statement names at most (bounded ``IN`` lists where arrays are not bound)
CHUNK = 10_000


class RunOwner(NamedTuple):
    """What a run is part of, and whose it is."""

    workflow_id: str
    stage_name: str
    task_id: int | None
    account_id: str
    #: ``<workflow id>/<stage name>[/<task>]``: made once, when the run is read, not at each
    #: list that names it
    label: str
    #: the Federate account whose caller the account is kept for (None: not a caller's)
    federate_account_id: str | None = None


def _owner(
    workflow_id: str,
    stage_name: str,
    task_id: int | None,
    account_id: str,
    federate_account_id: str | None,
) -> RunOwner:
    base = f"{workflow_id}/{stage_name}"
    label = base if task_id is None else f"{base}/{task_id}"
    return RunOwner(workflow_id, stage_name, task_id, account_id, label, federate_account_id)


_OWNER = (
    select(
        Run.id,
        Run.workflow_id,
        Stage.name,
        Run.task_id,
        Workflow.account_id,
        Account.federate_account_id,
    )
    .join(Stage, Stage.id == Run.stage_id)
    .join(Workflow, Workflow.id == Run.workflow_id)
    .outerjoin(Account, Account.id == Workflow.account_id)
)
#: PostgreSQL: every id as one array parameter, one statement text whatever their number
#: (an IN list renders and parses a parameter per id)
_OWNER_ANY = _OWNER.where(Run.id == any_(bindparam("ids", type_=ARRAY(Integer))))


def read_owners(session: Session, run_ids: Collection[int]) -> dict[int, RunOwner]:
    """Run id -> its owner, of the ``run_ids`` that are stored."""
    if not run_ids:
        return {}
    ids = list(run_ids)
    if session.get_bind().dialect.name == "postgresql":
        rows = list(session.execute(_OWNER_ANY, {"ids": ids}))
    else:
        rows = []
        for chunk in range(0, len(ids), CHUNK):
            rows += session.execute(_OWNER.where(Run.id.in_(ids[chunk : chunk + CHUNK])))
    return {
        run_id: _owner(workflow_id, stage_name, task_id, account_id, federate_account_id)
        for run_id, workflow_id, stage_name, task_id, account_id, federate_account_id in rows
    }


class RunOwners:
    """Owners of runs, remembered from one lookup to the next (the runs looked up last)."""

    def __init__(self) -> None:
        #: replaced whole by each lookup: lookups from several threads read either one
        self._known: Mapping[int, RunOwner] = {}

    def of(self, session: Session, run_ids: Collection[int]) -> Mapping[int, RunOwner]:
        """Run id -> its owner, of the ``run_ids`` that are stored: those of the last
        lookup as they were read, the rest read now."""
        known = self._known
        found = {run_id: known[run_id] for run_id in run_ids if run_id in known}
        if len(found) < len(run_ids):
            found.update(read_owners(session, [r for r in run_ids if r not in found]))
        # only this lookup's runs are kept: a run that ended goes with the next lookup
        self._known = found
        return found
