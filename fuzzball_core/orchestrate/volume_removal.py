"""Deleting a persistent volume's data from the nodes that hold it.

``DELETE /volumes/{id}`` takes the volume out of the API at once. A class that retains on
delete keeps the data (the row keeps its status and says ``retained``). Otherwise the row
becomes :data:`DELETING` and a ``RemoveVolume`` goes to the node that holds the data: the
holding node of a node-local volume, any READY node for a driver whose tree every node
sees. The node calls its storage driver's ``remove`` and answers ``VolumeRemoved``; the row
is then :data:`DELETED`. A node that is offline is told again when it reconnects (its Hello),
until it answers. A volume that a workflow not yet ended declares is never deleted: the
delete is refused naming the workflow (a later stage would get a new, empty volume of the
same name). A lost volume (its node gone) is DELETED at once: no node holds its data.
"""

from __future__ import annotations

import json
import logging

from sqlalchemy import or_, select

from fuzzball_core.errors import FailedPrecondition, FuzzballError
from fuzzball_core.orchestrate import volumes, workflow_volumes
from fuzzball_core.orchestrate.context import EngineContext
from fuzzball_core.orchestrate.messages import RemoveVolume
from fuzzball_core.orchestrate.states import READY
from fuzzball_core.orchestrate.transaction import Transaction
from fuzzball_core.store.models import (
    Account,
    Node,
    StorageClass,
    StorageDriverRow,
    Volume,
    Workflow,
)
from fuzzball_core.vocabulary import TERMINAL_STATUSES

log = logging.getLogger(__name__)

#: a deleted volume whose data a node has yet to remove
DELETING = "VOLUME_STATUS_DELETING"
#: a deleted volume whose data is gone
DELETED = "VOLUME_STATUS_DELETED"


def declared_by(ctx: EngineContext, tx: Transaction, row: Volume) -> list[str]:
    """The names of the workflows not yet ended that declare volume ``row``: a later stage
    of one may mount it, and deleting it in between would hand that stage a new, empty
    volume of the same name (references resolve by name)."""
    # an account of no organization owns its volumes under the organization id ""
    same_organization = (
        Account.organization_id == row.organization_id
        if row.organization_id
        else or_(Account.organization_id.is_(None), Account.organization_id == "")
    )
    unended = tx.session.scalars(
        select(Workflow)
        .join(Account, Account.id == Workflow.account_id)
        .where(Workflow.status.not_in(TERMINAL_STATUSES), same_organization)
        .order_by(Workflow.created_at, Workflow.id)
    )
    found: list[str] = []
    for workflow in unended:
        declared = ctx.plans.entry(workflow).parsed.model.volumes or {}
        references = [v.storage_reference for v in declared.values() if v.storage_reference]
        if not references:
            continue
        owner = volumes.VolumeOwner.of_workflow(tx.session, workflow)
        if any(volumes.refers_to(tx.session, owner, text, row) for text in references):
            found.append(workflow.name)
    return found


def delete(
    ctx: EngineContext, tx: Transaction, owner: volumes.VolumeOwner, volume_id: str
) -> dict[str, object]:
    """Delete the owner's volume (FailedPrecondition naming the workflows not yet ended that
    declare it); its data is kept when its class retains on delete, else removed from its
    node. Answers ``{"retained": bool, "status": ...}``."""
    row = volumes.find(tx.session, owner, volume_id)
    users = declared_by(ctx, tx, row)
    if users:
        raise FailedPrecondition(
            f"volume {volumes.reference_of(tx.session, row)} is declared by workflow(s) not "
            f"yet ended: {', '.join(repr(name) for name in users)}; delete it when they end "
            "(or stop them)"
        )
    lost = row.status == volumes.LOST
    retained = volumes.delete(tx.session, owner, volume_id, tx.now)
    if retained and not lost:
        return {"retained": True, "status": row.status}
    row.status = DELETING
    targets = None if lost else _targets(tx, row)
    if targets is None:
        # a node-local volume no job ever used, or whose node is gone: no node holds data
        row.status = DELETED
    else:
        _send(tx, row, targets)
    return {"retained": False, "status": row.status}


def _driver_name(tx: Transaction, row: Volume) -> tuple[str, StorageClass | None]:
    storage_class = tx.session.get(StorageClass, row.class_id)
    driver = tx.session.get(StorageDriverRow, storage_class.driver_id) if storage_class else None
    return (driver.name if driver is not None else ""), storage_class


def _node_local(tx: Transaction, row: Volume) -> bool:
    name, _ = _driver_name(tx, row)
    try:
        return bool(workflow_volumes.installed_driver(name).node_local)
    except FuzzballError:
        return False


def _targets(tx: Transaction, row: Volume) -> list[str] | None:
    """The node(s) to tell now: the holder of a node-local volume (None when it has none),
    else the first READY node (none ready: told when one connects)."""
    if _node_local(tx, row):
        return [row.node_id] if row.node_id else None
    ready = tx.session.scalars(select(Node.id).where(Node.status == READY).order_by(Node.id))
    first = ready.first()
    return [first] if first is not None else []


def _send(tx: Transaction, row: Volume, node_ids: list[str]) -> None:
    driver_name, storage_class = _driver_name(tx, row)
    location = volumes.location_of(tx.session, row, driver_name, storage_class)
    tx.send(node_ids, RemoveVolume(row.id, json.dumps(location.to_json())))


def deleting(tx: Transaction) -> list[Volume]:
    """The volumes whose removal some node has yet to answer."""
    return list(tx.session.scalars(select(Volume).where(Volume.status == DELETING)))


def resend(tx: Transaction, node_id: str, pending: list[Volume] | None = None) -> None:
    """A node (re)connected: tell it again of the removals it (or, for a shared tree, any
    node) has yet to answer (``pending``: :func:`deleting`, when the caller read it for
    several nodes)."""
    if pending is None:
        pending = deleting(tx)
    for row in pending:
        if not _node_local(tx, row) or row.node_id == node_id:
            _send(tx, row, [node_id])


def removed(tx: Transaction, node_id: str, row: Volume, error: str) -> None:
    """Node ``node_id`` answered a RemoveVolume for ``row`` (one it may remove:
    :mod:`~fuzzball_core.orchestrate.node_reports`): the volume is DELETED, or stays DELETING
    (told again at the node's next connection) with the node's error logged."""
    if row.status != DELETING:
        return  # answered twice (a reconnect re-sent it): the first answer counted
    if error:
        log.warning("volume %s: node %s could not remove its data: %s", row.id, node_id, error)
        return
    row.status = DELETED
    row.updated_at = tx.now
