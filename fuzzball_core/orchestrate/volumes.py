"""Volumes: ``volume://SCOPE/CLASS[/NAME]`` references resolved per their owner, and the
persistent volumes behind ``/volumes``.

A reference never names its owner: ``volume://user/persistent/results`` is *the caller's*
``results`` (the submitting user's, for a workflow), ``volume://group/...`` the account's in
use, so another organization's or user's reference resolves into one's own namespace and
cannot reach their data. ``CLASS`` is a storage class (:mod:`~fuzzball_core.orchestrate.
storage_catalog`); a class that is not persistent makes a per-workflow volume (no row here),
a persistent class a row per (organization, scope, owner, class, name), created on first use
unless the class is restricted, or over its per-group limit, or disabled (each refused
naming the class). A nameless persistent reference is the owner's ``default`` volume, with a
warning.

What a job's node needs is the :class:`~fuzzball_core.drivers.VolumeLocation` of each mounted
volume (:func:`resolve` answers it inside :class:`ResolvedVolume`, with what placement needs:
whether the volume may be used from several nodes, and the node holding a node-local one).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from fuzzball_core.drivers import VolumeLocation
from fuzzball_core.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from fuzzball_core.orchestrate import storage_catalog as catalog
from fuzzball_core.service.views import Principal
from fuzzball_core.store.models import (
    Account,
    Node,
    StorageClass,
    StorageDriverRow,
    User,
    Volume,
    Workflow,
)
from fuzzball_core.vocabulary import AccountKind

ENABLED = "VOLUME_STATUS_ENABLED"
DISABLED = "VOLUME_STATUS_DISABLED"
STATUSES = (ENABLED, DISABLED)
#: a node-local volume whose holding node is gone, and its data with it: mounting it is
#: refused naming the node (deleting it frees its name)
LOST = "VOLUME_STATUS_LOST"

#: the name a nameless persistent reference (``volume://user/persistent``) resolves to
DEFAULT_NAME = "default"

SCHEME = "volume://"
#: a reference's scope as written -> the scope it is (``account`` is the old name of ``group``)
SCOPES = {"user": "user", "group": "group", "account": "group"}
#: a volume's name
VOLUME_NAME_PATTERN = "[A-Za-z0-9][A-Za-z0-9._-]{0,62}"
_VOLUME_NAME = re.compile(VOLUME_NAME_PATTERN)
#: the longest volume display name (its column's width) and description, in characters
MAX_DISPLAY_NAME, MAX_DESCRIPTION = 255, 1024


@dataclass(frozen=True)
class VolumeOwner:
    """Whose namespace references resolve in: the organization, the account in use and the
    user acting (None for a service account's own token)."""

    organization_id: str
    account_id: str
    user_id: str | None = None
    username: str = ""

    @classmethod
    def of(cls, who: Principal) -> VolumeOwner:
        """An API caller's namespace."""
        return cls(who.organization_id or "", who.account_id, who.user_id, who.email or who.name)

    @classmethod
    def of_workflow(cls, session: Session, workflow: Workflow) -> VolumeOwner:
        """A workflow's namespace: its account's organization, and the user who submitted it
        (else its personal account's owner)."""
        account = session.get(Account, workflow.account_id)
        user_id = workflow.user_id
        if user_id is None and account is not None and account.kind == AccountKind.USER:
            user_id = account.owner_user_id
        user = session.get(User, user_id) if user_id else None
        return cls(
            organization_id=(account.organization_id if account else None) or "",
            account_id=workflow.account_id,
            user_id=user_id,
            username=(user.email if user is not None else "") or (account.name if account else ""),
        )

    def owner_id(self, scope: str) -> str:
        """The owner of ``scope``'s volumes: the user (or, with none, the account) for
        ``user``, the account in use for ``group``."""
        return (self.user_id or self.account_id) if scope == "user" else self.account_id


@dataclass(frozen=True)
class Reference:
    """A parsed ``volume://SCOPE/CLASS[/NAME]``."""

    scope: str
    storage_class: str
    name: str | None

    @classmethod
    def parse(cls, text: str, where: str = "reference") -> Reference:
        """Read ``text``; InvalidArgument naming ``where`` when it is not a volume reference."""
        if not text.startswith(SCHEME):
            raise InvalidArgument(f"{where}: must start with {SCHEME}, got {text!r}")
        parts = text.removeprefix(SCHEME).rstrip("/").split("/")
        if len(parts) not in (2, 3) or parts[0] not in SCOPES or not all(parts):
            raise InvalidArgument(
                f"{where}: must be volume://user|group/CLASS[/NAME], got {text!r}"
            )
        name = parts[2] if len(parts) == 3 else None
        if name is not None and not _VOLUME_NAME.fullmatch(name):
            raise InvalidArgument(
                f"{where}: volume name {name!r} must be 1-63 letters, digits, '.', '_' or '-'"
            )
        return cls(SCOPES[parts[0]], parts[1], name)

    def text(self, name: str | None = None) -> str:
        """The reference as text (with ``name`` in place of its own when given)."""
        named = name if name is not None else self.name
        return f"{SCHEME}{self.scope}/{self.storage_class}" + (f"/{named}" if named else "")


@dataclass(frozen=True)
class ResolvedVolume:
    """A reference resolved for one workflow: where its data lives (``location``, the node's
    mount contract) and what placement must respect.

    ``shared``: jobs of the workflow using it may run on different nodes (its driver's tree is
    seen by every node and its class allows several nodes); otherwise they are co-located.
    ``node_id``: the node holding a node-local persistent volume (its jobs go there only);
    None when any node may hold it (or it has not been used yet).
    """

    reference: str
    location: VolumeLocation
    volume_id: str | None
    shared: bool
    node_local: bool
    node_id: str | None
    warnings: tuple[str, ...] = ()


def _class_for(session: Session, reference: Reference, where: str) -> tuple[StorageClass, str]:
    row = session.scalars(
        select(StorageClass).where(StorageClass.name == reference.storage_class)
    ).first()
    if row is None:
        raise InvalidArgument(f"{where}: no storage class {reference.storage_class!r}")
    if row.status != catalog.READY:
        raise FailedPrecondition(f"{where}: storage class {row.name!r} is disabled")
    scope = catalog.class_scope(row)
    if scope != "ALL" and scope.lower() != reference.scope:
        raise InvalidArgument(
            f"{where}: storage class {row.name!r} holds only volume://{scope.lower()}/ volumes"
        )
    driver = session.get(StorageDriverRow, row.driver_id)
    assert driver is not None, "a storage class's driver row is kept while the class exists"
    return row, driver.name


def _live(
    session: Session, owner: VolumeOwner, scope: str, class_id: str, name: str
) -> Volume | None:
    return session.scalars(
        select(Volume).where(
            Volume.organization_id == owner.organization_id,
            Volume.scope == scope,
            Volume.owner_id == owner.owner_id(scope),
            Volume.class_id == class_id,
            Volume.name == name,
            Volume.deleted_at.is_(None),
        )
    ).first()


def _check_limit(session: Session, storage_class: StorageClass, owner: VolumeOwner) -> None:
    limit = catalog.group_limit(storage_class)
    if not limit:
        return
    held = session.scalar(
        select(func.count(Volume.id)).where(
            Volume.class_id == storage_class.id,
            Volume.account_id == owner.account_id,
            Volume.deleted_at.is_(None),
        )
    )
    if (held or 0) >= limit:
        raise FailedPrecondition(
            f"storage class {storage_class.name!r} allows {limit} volume(s) per group; "
            f"this group holds {held}"
        )


def _new_volume(
    session: Session,
    owner: VolumeOwner,
    reference: Reference,
    storage_class: StorageClass,
    name: str,
    now: float,
    *,
    display_name: str = "",
    description: str = "",
) -> Volume:
    _check_limit(session, storage_class, owner)
    row = Volume(
        id=str(uuid.uuid4()),
        organization_id=owner.organization_id,
        class_id=storage_class.id,
        scope=reference.scope,
        owner_id=owner.owner_id(reference.scope),
        account_id=owner.account_id,
        name=name,
        display_name=display_name,
        description=description,
        status=ENABLED,
        node_id=None,
        size_bytes=0,
        created_at=now,
        updated_at=now,
    )
    session.add(row)
    session.flush()
    return row


def _parameters(storage_class: StorageClass) -> dict[str, str]:
    parameters = dict(storage_class.definition.get("parameters") or {})
    if catalog.permissions_mode(storage_class):
        parameters["permissions"] = catalog.permissions_mode(storage_class)
    return parameters


def resolve(
    session: Session,
    drivers: catalog.DriverLookup,
    owner: VolumeOwner,
    text: str,
    *,
    workflow_id: str,
    volume_key: str,
    now: float,
    where: str = "reference",
) -> ResolvedVolume:
    """Resolve ``text`` for a workflow of ``owner`` (its volume named ``volume_key``):
    a per-workflow volume, or the owner's persistent volume, created on first use when its
    class allows. Refusals name ``where`` and the class."""
    catalog.ensure_defaults(session, now)
    reference = Reference.parse(text, where)
    storage_class, driver_name = _class_for(session, reference, where)
    driver = drivers(driver_name)
    multi_node = catalog.access_mode(storage_class) in catalog.MULTI_NODE_MODES or (
        catalog.access_mode(storage_class) == "MODE_UNSPECIFIED"
    )
    shared = driver.shared and multi_node
    if not storage_class.persistent and reference.name is not None:
        raise InvalidArgument(
            f"{where}: storage class {storage_class.name!r} makes one volume per workflow, "
            f"which has no name; write {reference.text()[: -len(reference.name) - 1]}"
        )
    if not storage_class.persistent:
        return ResolvedVolume(
            reference=reference.text(),
            location=VolumeLocation(
                driver=driver_name,
                storage_class=storage_class.name,
                organization_id=owner.organization_id,
                name=volume_key,
                workflow_id=workflow_id,
                parameters=_parameters(storage_class),
                capacity_bytes=catalog.capacity_bytes(storage_class),
            ),
            volume_id=None,
            shared=shared,
            node_local=False,
            node_id=None,
        )
    warnings: tuple[str, ...] = ()
    name = reference.name
    if name is None:
        name = DEFAULT_NAME
        warnings = (
            f"{where}: nameless persistent reference resolves to the default persistent "
            f"volume {reference.text(DEFAULT_NAME)}; name it",
        )
    row = _live(session, owner, reference.scope, storage_class.id, name)
    if row is None:
        if catalog.is_restricted(storage_class):
            raise FailedPrecondition(
                f"{where}: no volume {reference.text(name)}, and storage class "
                f"{storage_class.name!r} is restricted (create it with fuzzball volume create)"
            )
        row = _new_volume(session, owner, reference, storage_class, name, now)
    if driver.node_local and _holder_gone(session, row, now):
        raise FailedPrecondition(
            f"{where}: volume {reference.text(name)} lived on node {row.node_id}, which is "
            "gone: its data is lost (delete the volume to use its name again)"
        )
    if row.status != ENABLED:
        raise FailedPrecondition(f"{where}: volume {reference.text(name)} is disabled")
    row.access_time = now
    return ResolvedVolume(
        reference=reference.text(name),
        location=VolumeLocation(
            driver=driver_name,
            storage_class=storage_class.name,
            organization_id=owner.organization_id,
            volume_id=row.id,
            name=name,
            node_id=row.node_id,
            parameters=_parameters(storage_class),
            capacity_bytes=catalog.capacity_bytes(storage_class),
        ),
        volume_id=row.id,
        shared=shared,
        node_local=driver.node_local,
        node_id=row.node_id,
        warnings=warnings,
    )


def _holder_gone(session: Session, row: Volume, now: float) -> bool:
    """Whether node-local volume ``row`` is lost: marked so, or its holding node's record
    is gone (marked :data:`LOST` now, so reads show it)."""
    if row.status == LOST:
        return True
    if row.node_id is None or session.get(Node, row.node_id) is not None:
        return False
    row.status = LOST
    row.updated_at = now
    return True


def refers_to(session: Session, owner: VolumeOwner, text: str, row: Volume) -> bool:
    """Whether reference ``text``, read for ``owner``, names persistent volume ``row``
    (read only: unlike :func:`resolve`, nothing is created)."""
    try:
        reference = Reference.parse(text)
    except InvalidArgument:
        return False
    storage_class = session.get(StorageClass, row.class_id)
    return (
        storage_class is not None
        and reference.storage_class == storage_class.name
        and reference.scope == row.scope
        and (reference.name or DEFAULT_NAME) == row.name
        and owner.organization_id == row.organization_id
        and owner.owner_id(reference.scope) == row.owner_id
    )


def held_on(session: Session, node_id: str) -> list[Volume]:
    """The node-local volumes whose only copy node ``node_id`` holds: not deleted, not lost
    (a class retaining deleted volumes keeps their data beyond the API's reach, not counted)."""
    return list(
        session.scalars(
            select(Volume)
            .where(Volume.node_id == node_id, Volume.deleted_at.is_(None), Volume.status != LOST)
            .order_by(Volume.created_at, Volume.id)
        )
    )


def holding_refusal(session: Session, node_name: str, held: Sequence[Volume], doing: str) -> str:
    """Why ``doing`` to node ``node_name`` is refused: it holds the only copy of ``held``."""
    names = ", ".join(f"{reference_of(session, row)} ({row.id})" for row in held)
    return (
        f"cannot {doing} node {node_name}: it holds node-local persistent volume(s) {names}, "
        "whose data would be lost; delete them first (fuzzball volume delete)"
    )


def location_of(
    session: Session, row: Volume, driver_name: str, storage_class: StorageClass | None
) -> VolumeLocation:
    """Where persistent volume ``row`` lives (as an assignment says, for its removal)."""
    return VolumeLocation(
        driver=driver_name,
        storage_class=storage_class.name if storage_class is not None else "",
        organization_id=row.organization_id,
        volume_id=row.id,
        name=row.name,
        node_id=row.node_id,
        parameters=_parameters(storage_class) if storage_class is not None else {},
        capacity_bytes=catalog.capacity_bytes(storage_class) if storage_class is not None else 0,
    )


def record_node(session: Session, volume_id: str, node_id: str, now: float) -> None:
    """A job using a node-local volume was placed on ``node_id``: the volume lives there
    from now on (its first placement decides)."""
    row = session.get(Volume, volume_id)
    if row is not None and row.node_id is None:
        row.node_id = node_id
        row.updated_at = now


def record_size(session: Session, volume_id: str, size_bytes: int, now: float) -> None:
    """A node measured the volume's data (after a job using it ended)."""
    row = session.get(Volume, volume_id)
    if row is not None:
        row.size_bytes = max(0, int(size_bytes))
        row.access_time = now
        row.updated_at = now


# ---------------------------------------------------------------------------------------------
# The volume API
# ---------------------------------------------------------------------------------------------


def _visible(owner: VolumeOwner) -> Any:
    """What an owner sees: their own user volumes and their account's group volumes, in
    their organization."""
    return (
        (Volume.organization_id == owner.organization_id)
        & Volume.deleted_at.is_(None)
        & or_(
            (Volume.scope == "user") & (Volume.owner_id == owner.owner_id("user")),
            (Volume.scope == "group") & (Volume.owner_id == owner.owner_id("group")),
        )
    )


def find(session: Session, owner: VolumeOwner, volume_id: str) -> Volume:
    """The owner's volume by id; NotFound for any other (another organization's included)."""
    row = session.scalars(select(Volume).where(Volume.id == volume_id, _visible(owner))).first()
    if row is None:
        raise NotFound(f"volume {volume_id!r} not found")
    return row


def listed(session: Session, owner: VolumeOwner) -> Sequence[Volume]:
    """The owner's volumes, oldest first."""
    return session.scalars(
        select(Volume).where(_visible(owner)).order_by(Volume.created_at, Volume.id)
    ).all()


def create(
    session: Session,
    owner: VolumeOwner,
    *,
    name: str,
    storage_class: str,
    scope: str,
    display_name: str,
    description: str,
    now: float,
) -> Volume:
    """Create the owner's persistent volume ``name`` of ``storage_class`` (AlreadyExists when
    it exists; InvalidArgument for a class that is not persistent)."""
    catalog.ensure_defaults(session, now)
    reference = Reference.parse(f"{SCHEME}{scope}/{storage_class}/{name}", "volume")
    row, _ = _class_for(session, reference, "volume.storageClassName")
    if not row.persistent:
        raise InvalidArgument(
            f"volume.storageClassName: storage class {row.name!r} is not persistent (its "
            "volumes live with their workflow)"
        )
    if reference.name != name:  # "results/" reads as the reference of "results"
        raise InvalidArgument(
            f"volume.name: {name!r} must be 1-63 letters, digits, '.', '_' or '-'"
        )
    if _live(session, owner, reference.scope, row.id, name) is not None:
        raise AlreadyExists(f"volume {reference.text()} already exists")
    return _new_volume(
        session,
        owner,
        reference,
        row,
        name,
        now,
        display_name=display_name,
        description=description,
    )


def update(
    session: Session,
    owner: VolumeOwner,
    volume_id: str,
    *,
    name: str | None,
    display_name: str | None,
    description: str | None,
    now: float,
) -> Volume:
    """Rename or describe the owner's volume (a new name must be free)."""
    row = find(session, owner, volume_id)
    if name is not None and name != row.name:
        if not _VOLUME_NAME.fullmatch(name):
            raise InvalidArgument(
                f"volume.name: {name!r} must be 1-63 letters, digits, '.', '_' or '-'"
            )
        if _live(session, owner, row.scope, row.class_id, name) is not None:
            raise AlreadyExists(f"volume.name: {name!r} is taken")
        row.name = name
    if display_name is not None:
        row.display_name = display_name
    if description is not None:
        row.description = description
    row.updated_at = now
    return row


def set_status(
    session: Session, owner: VolumeOwner, volume_id: str, status: str, now: float
) -> Volume:
    """Enable or disable the owner's volume (a disabled one cannot be mounted)."""
    if status not in STATUSES:
        raise InvalidArgument(f"status: must be one of {', '.join(STATUSES)}, got {status!r}")
    row = find(session, owner, volume_id)
    row.status = status
    row.updated_at = now
    return row


def delete(session: Session, owner: VolumeOwner, volume_id: str, now: float) -> bool:
    """Delete the owner's volume: it leaves the API at once. Whether its data is kept (its
    class's ``retainOnDelete``) is answered."""
    row = find(session, owner, volume_id)
    storage_class = session.get(StorageClass, row.class_id)
    row.deleted_at = now
    row.updated_at = now
    return bool(storage_class is not None and storage_class.retain_on_delete)


def reference_of(session: Session, row: Volume) -> str:
    """The volume's reference as its owner writes it."""
    storage_class = session.get(StorageClass, row.class_id)
    class_name = storage_class.name if storage_class is not None else "?"
    return f"{SCHEME}{row.scope}/{class_name}/{row.name}"
