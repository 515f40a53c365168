"""Telling nodes that workflows ended, so they remove the workflows' directories.

A node keeps each workflow's directory (its per-workflow volumes, its ingress markers) until
Orchestrate says the workflow ended: only Orchestrate knows whether a dependent job or an
egress pinned to the node is still to come, however long after the workflow's last run
there.

* The engine keeps, for each live workflow, the nodes that hold a directory of it
  (``EngineContext.workflow_nodes``): each node a run of it is placed on (:func:`ran_on`),
  and, after a restart of Orchestrate, each node whose Hello says it keeps one (the nodes of
  the runs still open are noted as the engine rebuilds them). Kept in memory, it costs a
  workflow's end no query: a pass that ends a single run's workflow reads no run.
* When a workflow ends (:func:`tell_nodes`), each of those nodes gets one ``WorkflowEnded``
  naming it (the node's stream batches what a pass queued for it into one write). A node
  that is not connected then misses it, so:
* A node's Hello names the workflows it keeps; :func:`answer_hello` sends it a
  ``WorkflowEnded`` for those that ended, and those this Orchestrate does not know (deleted,
  or never its own), one query for a whole batch of Hellos (:func:`statuses`). The workflow
  rows say it: nothing more is stored for it, and a restart loses nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, cast

from sqlalchemy import Table, bindparam, select
from sqlalchemy.orm import Session

from fuzzball_core.orchestrate.messages import WorkflowEnded
from fuzzball_core.orchestrate.transaction import Transaction
from fuzzball_core.store.models import Workflow
from fuzzball_core.vocabulary import TERMINAL_STATUSES

if TYPE_CHECKING:  # the context imports the modules of the engine's work, this one too
    from fuzzball_core.orchestrate.context import EngineContext

_WORKFLOWS = cast(Table, Workflow.__table__)
#: The status of each workflow named ``asked`` (built once, on the table).
_STATUSES = select(_WORKFLOWS.c.id, _WORKFLOWS.c.status).where(
    _WORKFLOWS.c.id.in_(bindparam("asked", expanding=True))
)
#: The most workflow ids one status query names (a batch of Hellos may ask about many).
QUERY_CHUNK = 1000


def ran_on(ctx: EngineContext, workflow_id: str, node_ids: Iterable[str]) -> None:
    """A run of ``workflow_id`` is placed on ``node_ids`` (or they keep a directory of it):
    they are told when it ends."""
    ctx.workflow_nodes.setdefault(workflow_id, set()).update(node_ids)


def tell_nodes(ctx: EngineContext, tx: Transaction, workflow_id: str) -> None:
    """``workflow_id`` ends in ``tx``: once it commits, each node holding a directory of it
    is sent a ``WorkflowEnded`` naming it, and the workflow's nodes are forgotten."""
    held_by = ctx.workflow_nodes.get(workflow_id)
    if not held_by:
        return
    tx.send(sorted(held_by), WorkflowEnded((workflow_id,)))

    def forget() -> None:
        ctx.workflow_nodes.pop(workflow_id, None)

    tx.after_commit(forget)  # a pass that fails ends it again, telling the same nodes


def statuses(session: Session, workflow_ids: Iterable[str]) -> dict[str, str]:
    """``{workflow id: status}`` of those of ``workflow_ids`` that exist (one query per
    :data:`QUERY_CHUNK` ids: one for a usual batch of Hellos, none for no ids)."""
    asked = sorted(set(workflow_ids))
    found: dict[str, str] = {}
    if not asked:
        return found
    connection = session.connection()
    for start in range(0, len(asked), QUERY_CHUNK):
        chunk = asked[start : start + QUERY_CHUNK]
        for workflow_id, status in connection.execute(_STATUSES, {"asked": chunk}):
            found[workflow_id] = status
    return found


def answer_hello(
    ctx: EngineContext,
    tx: Transaction,
    node_id: str,
    kept: Collection[str],
    known: Mapping[str, str] | None = None,
) -> list[str]:
    """Node ``node_id``'s Hello says it keeps the directories of the workflows ``kept``:
    send it a ``WorkflowEnded`` naming those that ended (or are unknown here), note it as
    holding the others (told when they end), and return the ended ones. ``known``: their
    statuses as a batch of Hellos read them (:func:`statuses`), else read here."""
    if not kept:
        return []
    if known is None:
        known = statuses(tx.session, kept)
    ended = []
    for workflow_id in sorted(set(kept)):
        status = known.get(workflow_id)
        if status is None or status in TERMINAL_STATUSES:
            ended.append(workflow_id)
        else:
            ran_on(ctx, workflow_id, (node_id,))
    if ended:
        tx.send([node_id], WorkflowEnded(tuple(ended)))
    return ended
