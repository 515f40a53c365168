"""The cluster's storage drivers and storage classes (``/admin/drivers``,
``/admin/storage-classes``, ``/storage-classes``).

A driver row names a plugin of the ``fuzzball.storage_drivers`` group (builtin: ``hostpath``,
``local``, ``ephemeral``; a site installs its own package); the swagger's DriverDefinition
shape (image, command, mounts, files of a CSI-like driver container) is accepted for it, with
a warning naming each of those fields, since the driver runs as the plugin inside Substrate
and no driver container is started. A definition naming no installed plugin is refused.

A storage class is accepted field by field (:func:`check_class`): each field of the swagger's
StorageClassDefinition is used, accepted with a warning naming it, or refused naming it.
Two classes exist from the start (:func:`ensure_defaults`): ``ephemeral`` (per workflow,
the ``ephemeral`` driver) and ``persistent`` (node-local persistent volumes, the ``local``
driver); an administrator adds shared ones (``hostpath`` with ``parameters.root``).
"""

from __future__ import annotations

import base64
import binascii
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from fuzzball_core.drivers import StorageDriver
from fuzzball_core.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from fuzzball_core.store.models import StorageClass, StorageDriverRow, Volume

#: a storage driver instance by plugin name (NotFound-free: raises FailedPrecondition when
#: no plugin of that name is installed)
DriverLookup = Callable[[str], StorageDriver]

READY = "STORAGE_CLASS_STATUS_READY"
DISABLED = "STORAGE_CLASS_STATUS_DISABLED"

EPHEMERAL_CLASS = "ephemeral"
PERSISTENT_CLASS = "persistent"

#: a driver's or class's name
NAME_PATTERN = "[a-z0-9][a-z0-9-]{0,62}"
_NAME = re.compile(NAME_PATTERN)

#: access modes whose volumes may be used from several nodes at once
MULTI_NODE_MODES = frozenset(
    {"MULTI_NODE_READER_ONLY", "MULTI_NODE_SINGLE_WRITER", "MULTI_NODE_MULTI_WRITER"}
)
ACCESS_MODES = MULTI_NODE_MODES | {
    "MODE_UNSPECIFIED",
    "SINGLE_NODE_WRITER",
    "SINGLE_NODE_READER_ONLY",
    "SINGLE_NODE_SINGLE_WRITER",
    "SINGLE_NODE_MULTI_WRITER",
}
#: the access types accepted (BLOCK is refused: volumes are directories)
ACCESS_TYPES = ("TYPE_UNSPECIFIED", "FILESYSTEM")
#: a mount's user and group ownerships (accepted with a warning: a volume belongs to its job)
OWNERSHIPS = ("OWNERSHIP_UNSPECIFIED", "ROOT", "USER", "ACCOUNT", "GROUP")
#: an affinity's types (accepted with a warning: jobs are placed by their own annotations)
AFFINITY_TYPES = ("AFFINITY_UNSPECIFIED", "ANNOTATION", "RESOURCE")
#: a mount's ``permissions``: an octal mode
PERMISSIONS_PATTERN = "0?[0-7]{3,4}"
SCOPES = ("SCOPE_UNSPECIFIED", "ALL", "USER", "ACCOUNT", "GROUP")
NAME_ARGS = (
    "USERNAME",
    "ORGANIZATION_ID",
    "ACCOUNT_ID",
    "GROUP_ID",
    "WORKFLOW_ID",
    "CUSTOM_NAME",
)
_CLASS_FIELDS = frozenset(
    {
        "version",
        "name",
        "description",
        "driver",
        "mount",
        "access",
        "parameters",
        "secrets",
        "properties",
        "capabilities",
        "scope",
        "capacity",
        "affinities",
        "volumes",
        "restricted",
    }
)
_DRIVER_FIELDS = frozenset(
    {"version", "name", "description", "image", "cmd", "args", "envs", "mounts", "files"}
)
#: DriverDefinition fields describing a driver container, which is never started here
_CONTAINER_FIELDS = ("image", "cmd", "args", "envs", "mounts", "files")


@dataclass(frozen=True)
class Accepted:
    """A definition as accepted, and the warnings saying which of its fields have no effect."""

    definition: dict[str, Any]
    warnings: tuple[str, ...] = ()


# ---------------------------------------------------------------------------------------------
# Checking definitions
# ---------------------------------------------------------------------------------------------


def _object(value: Any, path: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidArgument(f"{path}: must be an object")
    return value


def _string(value: Any, path: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidArgument(f"{path}: must be a string")
    return value


def _strings(value: Any, path: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InvalidArgument(f"{path}: must be a list of strings")
    return value


def _unknown(document: Mapping[str, Any], known: frozenset[str], path: str) -> None:
    extra = sorted(set(document) - known)
    if extra:
        raise InvalidArgument(
            f"{path}.{extra[0]}: unknown field (known: {', '.join(sorted(known))})"
        )


def _name(value: Any, path: str) -> str:
    name = _string(value, path)
    if not _NAME.fullmatch(name):
        raise InvalidArgument(
            f"{path}: must be 1-63 lowercase letters, digits and dashes, got {name!r}"
        )
    return name


def check_driver(document: Any, drivers: DriverLookup) -> Accepted:
    """Accept a DriverDefinition naming an installed ``fuzzball.storage_drivers`` plugin;
    its container fields are kept with a warning each (the plugin runs inside Substrate)."""
    definition = _object(document, "driver")
    _unknown(definition, _DRIVER_FIELDS, "driver")
    name = _name(definition.get("name"), "driver.name")
    _string(definition.get("version"), "driver.version")
    _string(definition.get("description"), "driver.description")
    image = _object(definition.get("image"), "driver.image")
    _unknown(image, frozenset({"uri", "secret"}), "driver.image")
    _string(image.get("uri"), "driver.image.uri")
    _string(image.get("secret"), "driver.image.secret")
    _string(definition.get("cmd"), "driver.cmd")
    _strings(definition.get("args"), "driver.args")
    envs = _object(definition.get("envs"), "driver.envs")
    if not all(isinstance(value, str) for value in envs.values()):
        raise InvalidArgument("driver.envs: must map names to strings")
    for index, mount in enumerate(definition.get("mounts") or []):
        at = f"driver.mounts[{index}]"
        mount = _object(mount, at)
        _unknown(mount, frozenset({"source", "destination", "options"}), at)
        for key in ("source", "destination"):
            if not _string(mount.get(key), f"{at}.{key}").startswith("/"):
                raise InvalidArgument(f"{at}.{key}: must be an absolute path")
        _strings(mount.get("options"), f"{at}.options")
    for index, file in enumerate(definition.get("files") or []):
        at = f"driver.files[{index}]"
        file = _object(file, at)
        _unknown(file, frozenset({"path", "content", "secret"}), at)
        if not _string(file.get("path"), f"{at}.path").startswith("/"):
            raise InvalidArgument(f"{at}.path: must be an absolute path")
        try:
            base64.b64decode(_string(file.get("content"), f"{at}.content"), validate=True)
        except binascii.Error:
            raise InvalidArgument(f"{at}.content: must be base64") from None
        _string(file.get("secret"), f"{at}.secret")
    try:
        drivers(name)
    except FailedPrecondition:
        raise FailedPrecondition(
            f"driver.name: no storage driver plugin named {name!r} is installed (driver "
            "containers are not run here; install a fuzzball.storage_drivers plugin of that name)"
        ) from None
    warnings = tuple(
        f"driver.{key}: has no effect: the driver runs as the plugin {name!r} inside Substrate"
        " and no driver container is started"
        for key in _CONTAINER_FIELDS
        if definition.get(key)
    )
    return Accepted(definition, warnings)


def _check_access(access: dict[str, Any], driver: StorageDriver, name: str) -> list[str]:
    _unknown(access, frozenset({"type", "mode"}), "class.access")
    kind = _string(access.get("type"), "class.access.type") or "TYPE_UNSPECIFIED"
    if kind == "BLOCK":
        raise InvalidArgument("class.access.type: BLOCK volumes are not supported (FILESYSTEM)")
    if kind not in ("TYPE_UNSPECIFIED", "FILESYSTEM"):
        raise InvalidArgument(f"class.access.type: unknown type {kind!r}")
    mode = _string(access.get("mode"), "class.access.mode") or "MODE_UNSPECIFIED"
    if mode not in ACCESS_MODES:
        raise InvalidArgument(f"class.access.mode: unknown mode {mode!r}")
    if mode in MULTI_NODE_MODES and not driver.shared:
        raise InvalidArgument(
            f"class.access.mode: {mode} needs a driver whose volumes every node sees; "
            f"{name!r} keeps them on one node"
        )
    if "READER_ONLY" in mode or mode.endswith("SINGLE_WRITER"):
        return [f"class.access.mode: {mode} is not enforced here (every job may write)"]
    return []


def _check_mount(mount: dict[str, Any]) -> list[str]:
    _unknown(
        mount, frozenset({"filesystem", "options", "user", "group", "permissions"}), "class.mount"
    )
    warnings = [
        f"class.mount.{key}: has no effect (volumes are directories of the driver's tree)"
        for key in ("filesystem", "options")
        if mount.get(key)
    ]
    _string(mount.get("filesystem"), "class.mount.filesystem")
    _strings(mount.get("options"), "class.mount.options")
    for key in ("user", "group"):
        ownership = _string(mount.get(key), f"class.mount.{key}")
        if ownership and ownership not in OWNERSHIPS:
            raise InvalidArgument(
                f"class.mount.{key}: unknown ownership {ownership!r} "
                f"(one of {', '.join(OWNERSHIPS)})"
            )
        if ownership not in ("", "OWNERSHIP_UNSPECIFIED"):
            warnings.append(
                f"class.mount.{key}: has no effect (a volume belongs to the uid and gid of the "
                "job using it)"
            )
    permissions = _string(mount.get("permissions"), "class.mount.permissions")
    if permissions and not re.fullmatch(PERMISSIONS_PATTERN, permissions):
        raise InvalidArgument(
            f"class.mount.permissions: must be an octal mode such as 0770, got {permissions!r}"
        )
    return warnings


def _check_affinity(affinity: dict[str, Any], at: str) -> None:
    """An Affinity of the swagger's shape (accepted with a warning: it has no effect)."""
    _unknown(affinity, frozenset({"type", "key", "filter"}), at)
    kind = _string(affinity.get("type"), f"{at}.type")
    if kind and kind not in AFFINITY_TYPES:
        raise InvalidArgument(
            f"{at}.type: unknown type {kind!r} (one of {', '.join(AFFINITY_TYPES)})"
        )
    _string(affinity.get("key"), f"{at}.key")
    _string(affinity.get("filter"), f"{at}.filter")


def _check_volumes(volumes: dict[str, Any]) -> None:
    _unknown(volumes, frozenset({"nameArgs", "nameFormat", "maxByAccount"}), "class.volumes")
    args = _strings(volumes.get("nameArgs"), "class.volumes.nameArgs")
    for arg in args:
        if arg not in NAME_ARGS:
            raise InvalidArgument(f"class.volumes.nameArgs: unknown argument {arg!r}")
    name_format = _string(volumes.get("nameFormat"), "class.volumes.nameFormat")
    if "%" in name_format.replace("%%", "").replace("%s", "") or (
        name_format and name_format.count("%s") != len(args)
    ):
        raise InvalidArgument(
            "class.volumes.nameFormat: must hold one %s per nameArgs entry "
            f"({len(args)}), got {name_format!r}"
        )
    limit = volumes.get("maxByAccount")
    if limit is not None and _whole_number(limit, _INT64_MAX) is None:
        # an int64 field arrives as a JSON string or number; a fraction, an exponent that
        # overflows (1e400 reads as infinity) or a negative count is no count of volumes
        raise InvalidArgument(
            f"class.volumes.maxByAccount: must be a whole number from 0 (no limit) to {_INT64_MAX}"
        )


def _whole_number(value: Any, most: int) -> int | None:
    """``value`` (a JSON number or a string of digits) as an integer from 0 to ``most``;
    None for anything else (a boolean, a fraction, a sign, a non-ASCII digit)."""
    if isinstance(value, str) and value.isascii() and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= most:
        return None
    return value


def check_class(document: Any, drivers: DriverLookup, driver_name: str | None = None) -> Accepted:
    """Accept a StorageClassDefinition: every field used, warned about or refused by name.
    ``driver_name`` is the installed driver the class's ``driver`` names (checked by the
    caller against the driver table; None: use ``driver`` itself)."""
    definition = _object(document, "class")
    _unknown(definition, _CLASS_FIELDS, "class")
    name = _name(definition.get("name"), "class.name")
    _string(definition.get("version"), "class.version")
    _string(definition.get("description"), "class.description")
    plugin = driver_name or _string(definition.get("driver"), "class.driver")
    if not plugin:
        raise InvalidArgument("class.driver: required (an installed driver's name)")
    driver = drivers(plugin)
    warnings = _check_access(_object(definition.get("access"), "class.access"), driver, name)
    warnings += _check_mount(_object(definition.get("mount"), "class.mount"))
    parameters = _object(definition.get("parameters"), "class.parameters")
    if not all(isinstance(value, str) for value in parameters.values()):
        raise InvalidArgument("class.parameters: must map names to strings")
    for parameter, why in driver.check_parameters(parameters):
        raise InvalidArgument(f"class.parameters.{parameter}: {why}")
    secrets = _object(definition.get("secrets"), "class.secrets")
    _unknown(secrets, frozenset({"default"}), "class.secrets")
    if _string(secrets.get("default"), "class.secrets.default"):
        warnings.append("class.secrets.default: has no effect (no driver here takes secrets)")
    properties = _object(definition.get("properties"), "class.properties")
    _unknown(properties, frozenset({"retainOnDelete", "persistent"}), "class.properties")
    for key in ("retainOnDelete", "persistent"):
        if not isinstance(properties.get(key, False), bool):
            raise InvalidArgument(f"class.properties.{key}: must be a boolean")
    if properties.get("persistent") and plugin == "ephemeral":
        raise InvalidArgument(
            "class.properties.persistent: the ephemeral driver keeps only per-workflow volumes"
        )
    for capability in _strings(definition.get("capabilities"), "class.capabilities"):
        if capability != "CAPABILITY_UNSPECIFIED":
            raise InvalidArgument(f"class.capabilities: {capability} is not supported here")
    scope = _string(definition.get("scope"), "class.scope") or "SCOPE_UNSPECIFIED"
    if scope not in SCOPES:
        raise InvalidArgument(f"class.scope: unknown scope {scope!r}")
    if _capacity_bytes(definition) and not (
        driver.enforces_capacity and properties.get("persistent")
    ):
        whose = f"the {plugin} driver" if not driver.enforces_capacity else "a per-workflow volume"
        warnings.append(
            f"class.capacity: {whose} has no quota here, so a volume is held to it only "
            "before each ingress transfer (jobs may write past it)"
        )
    for index, affinity in enumerate(definition.get("affinities") or []):
        _check_affinity(
            _object(affinity, f"class.affinities[{index}]"), f"class.affinities[{index}]"
        )
        warnings.append(
            f"class.affinities[{index}]: has no effect (jobs are placed by their own "
            "annotations and their volumes' nodes)"
        )
    _check_volumes(_object(definition.get("volumes"), "class.volumes"))
    if not isinstance(definition.get("restricted", False), bool):
        raise InvalidArgument("class.restricted: must be a boolean")
    return Accepted(definition, tuple(warnings))


# ---------------------------------------------------------------------------------------------
# Reading what a class says
# ---------------------------------------------------------------------------------------------


def access_mode(row: StorageClass) -> str:
    """The class's access mode (``MODE_UNSPECIFIED`` when it sets none)."""
    return str((row.definition.get("access") or {}).get("mode") or "MODE_UNSPECIFIED")


def class_scope(row: StorageClass) -> str:
    """Which references may use the class: ``ALL``, ``USER`` or ``GROUP``."""
    scope = str(row.definition.get("scope") or "ALL")
    return {"SCOPE_UNSPECIFIED": "ALL", "ACCOUNT": "GROUP"}.get(scope, scope)


#: StorageClassDefinition.Capacity.Unit -> bytes
CAPACITY_UNITS = {"MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40, "PIB": 1 << 50, "EIB": 1 << 60}
_UINT64_MAX = (1 << 64) - 1
_INT64_MAX = (1 << 63) - 1


def _capacity_bytes(definition: Mapping[str, Any]) -> int:
    """The class's ``capacity`` in bytes (0: none), refusing a malformed one by field."""
    capacity = _object(definition.get("capacity"), "class.capacity")
    _unknown(capacity, frozenset({"size", "unit"}), "class.capacity")
    size = capacity.get("size")
    if size in (None, ""):
        return 0
    size = _whole_number(size, _UINT64_MAX)  # not "²"
    if size is None:
        raise InvalidArgument("class.capacity.size: must be a whole number (uint64)")
    if size == 0:
        return 0
    unit = _string(capacity.get("unit"), "class.capacity.unit")
    if unit not in CAPACITY_UNITS:
        raise InvalidArgument(
            f"class.capacity.unit: must be one of {', '.join(CAPACITY_UNITS)} (got {unit!r})"
        )
    total = size * CAPACITY_UNITS[unit]
    if total > _UINT64_MAX:
        raise InvalidArgument("class.capacity: larger than 2^64 bytes")
    return total


def capacity_bytes(row: StorageClass) -> int:
    """The most one volume of the class may hold, in bytes; 0: no limit."""
    return _capacity_bytes(row.definition)


def group_limit(row: StorageClass) -> int:
    """How many live volumes one group (account) may hold of the class; 0: no limit."""
    return int((row.definition.get("volumes") or {}).get("maxByAccount") or 0)


def is_restricted(row: StorageClass) -> bool:
    """Whether volumes of the class are made only through the volume API (never created on
    first use by a workflow)."""
    return bool(row.definition.get("restricted"))


def permissions_mode(row: StorageClass) -> str:
    """The volume directory's mode the class asks for (octal text), empty for the driver's."""
    return str((row.definition.get("mount") or {}).get("permissions") or "")


def storage_name(row: StorageClass, values: Mapping[str, str]) -> str:
    """A volume's name as the class's ``nameFormat`` writes it from ``values`` (nameArgs ->
    value); the custom name alone when the class has no format."""
    volumes = row.definition.get("volumes") or {}
    name_format = str(volumes.get("nameFormat") or "")
    if not name_format:
        return values.get("CUSTOM_NAME", "")
    return name_format % tuple(values.get(arg, "") for arg in volumes.get("nameArgs") or [])


# ---------------------------------------------------------------------------------------------
# Rows
# ---------------------------------------------------------------------------------------------


def _builtin_class(name: str, driver: str, persistent: bool) -> dict[str, Any]:
    return {
        "version": "v1",
        "name": name,
        "description": f"{'node-local persistent' if persistent else 'per-workflow'} volumes",
        "driver": driver,
        "properties": {"persistent": persistent, "retainOnDelete": False},
        "scope": "ALL",
    }


def ensure_defaults(session: Session, now: float) -> None:
    """Install the builtin drivers and the ``ephemeral`` and ``persistent`` classes when no
    storage class exists yet (once per store; an administrator may change them later)."""
    if session.scalars(select(StorageClass.id).limit(1)).first() is not None:
        return
    rows = {}
    for driver in ("ephemeral", "local", "hostpath"):
        row = session.scalars(
            select(StorageDriverRow).where(StorageDriverRow.name == driver)
        ).first()
        if row is None:
            row = StorageDriverRow(
                id=str(uuid.uuid4()),
                name=driver,
                definition={"version": "v1", "name": driver, "description": "builtin"},
                created_at=now,
                updated_at=now,
            )
            session.add(row)
        rows[driver] = row
    for name, driver, persistent in (
        (EPHEMERAL_CLASS, "ephemeral", False),
        (PERSISTENT_CLASS, "local", True),
    ):
        session.add(
            StorageClass(
                id=str(uuid.uuid4()),
                name=name,
                driver_id=rows[driver].id,
                definition=_builtin_class(name, driver, persistent),
                status=READY,
                persistent=persistent,
                retain_on_delete=False,
                created_at=now,
                updated_at=now,
            )
        )
    session.flush()


def install_driver(session: Session, accepted: Accepted, now: float) -> StorageDriverRow:
    """Add a driver row; AlreadyExists when its name is taken."""
    name = accepted.definition["name"]
    if session.scalars(select(StorageDriverRow).where(StorageDriverRow.name == name)).first():
        raise AlreadyExists(f"storage driver {name!r} already exists")
    row = StorageDriverRow(
        id=str(uuid.uuid4()),
        name=name,
        definition=accepted.definition,
        created_at=now,
        updated_at=now,
    )
    session.add(row)
    session.flush()
    return row


def find_driver(session: Session, reference: str) -> StorageDriverRow:
    """A driver by id or name; NotFound otherwise."""
    row = (
        session.get(StorageDriverRow, reference)
        or session.scalars(
            select(StorageDriverRow).where(StorageDriverRow.name == reference)
        ).first()
    )
    if row is None:
        raise NotFound(f"storage driver {reference!r} not found")
    return row


def uninstall_driver(session: Session, reference: str) -> str:
    """Remove a driver no storage class uses (FailedPrecondition naming the classes); its id."""
    row = find_driver(session, reference)
    users = session.scalars(select(StorageClass.name).where(StorageClass.driver_id == row.id)).all()
    if users:
        raise FailedPrecondition(
            f"storage driver {row.name!r} is used by the storage classes {', '.join(sorted(users))}"
        )
    session.delete(row)
    return row.id


def find_class(session: Session, reference: str) -> StorageClass:
    """A storage class by id or name; NotFound otherwise."""
    row = (
        session.get(StorageClass, reference)
        or session.scalars(select(StorageClass).where(StorageClass.name == reference)).first()
    )
    if row is None:
        raise NotFound(f"storage class {reference!r} not found")
    return row


def create_class(
    session: Session, document: Any, drivers: DriverLookup, now: float
) -> tuple[StorageClass, tuple[str, ...]]:
    """Add a storage class from its definition (checked by :func:`check_class`); the row and
    the warnings. AlreadyExists when its name is taken, NotFound for an unknown driver."""
    driver_name = _string(_object(document, "class").get("driver"), "class.driver")
    if not driver_name:
        raise InvalidArgument("class.driver: required (an installed driver's name)")
    driver = find_driver(session, driver_name)
    accepted = check_class(document, drivers, driver.name)
    name = accepted.definition["name"]
    if session.scalars(select(StorageClass).where(StorageClass.name == name)).first():
        raise AlreadyExists(f"storage class {name!r} already exists")
    properties = accepted.definition.get("properties") or {}
    row = StorageClass(
        id=str(uuid.uuid4()),
        name=name,
        driver_id=driver.id,
        definition=accepted.definition,
        status=READY,
        persistent=bool(properties.get("persistent")),
        retain_on_delete=bool(properties.get("retainOnDelete")),
        created_at=now,
        updated_at=now,
    )
    session.add(row)
    session.flush()
    return row, accepted.warnings


def update_class(
    session: Session, reference: str, document: Any, drivers: DriverLookup, now: float
) -> tuple[StorageClass, tuple[str, ...]]:
    """Replace a class's definition. Its name, driver and persistence are fixed once volumes
    of it exist (FailedPrecondition naming the field): their data lives where those say."""
    row = find_class(session, reference)
    definition = _object(document, "class")
    driver = find_driver(
        session, _string(definition.get("driver"), "class.driver") or row.driver_id
    )
    accepted = check_class(definition, drivers, driver.name)
    properties = accepted.definition.get("properties") or {}
    in_use = session.scalars(select(Volume.id).where(Volume.class_id == row.id).limit(1)).first()
    if in_use is not None:
        for field, before, after in (
            ("name", row.name, accepted.definition["name"]),
            ("driver", row.driver_id, driver.id),
            ("properties.persistent", row.persistent, bool(properties.get("persistent"))),
        ):
            if before != after:
                raise FailedPrecondition(
                    f"class.{field}: cannot change while volumes of {row.name!r} exist"
                )
    warnings = accepted.warnings
    if in_use is not None and drivers(driver.name).enforces_capacity:
        warnings += _capacity_change(row, accepted.definition)
    row.name = accepted.definition["name"]
    row.driver_id = driver.id
    row.definition = accepted.definition
    row.persistent = bool(properties.get("persistent"))
    row.retain_on_delete = bool(properties.get("retainOnDelete"))
    row.updated_at = now
    return row, warnings


def _capacity_change(row: StorageClass, definition: Mapping[str, Any]) -> tuple[str, ...]:
    """What a new capacity does to the volumes of ``row`` that exist (its driver holds each
    volume to the capacity in a filesystem of that size):
    a lower one leaves each at its size (ext4 is not shrunk), a higher one grows each only
    when a job next takes it while no other job of its node uses it. Said to whoever changes
    it, not only in the nodes' logs."""
    before, after = capacity_bytes(row), _capacity_bytes(definition)
    if before == after or not before or not after or not row.persistent:
        return ()  # unchanged, or no quota before or after: no filesystem of that size
    if after < before:
        return (
            f"class.capacity: lowered from {before} to {after} bytes while volumes of "
            f"{row.name!r} exist: they keep their size (ext4 is not shrunk); only new volumes "
            "get the new capacity",
        )
    return (
        f"class.capacity: raised from {before} to {after} bytes while volumes of "
        f"{row.name!r} exist: each grows when a job next takes it while no other job on its "
        "node uses it",
    )


def delete_class(session: Session, reference: str) -> str:
    """Remove a class no volume uses (FailedPrecondition saying how many do); its id."""
    row = find_class(session, reference)
    count = len(session.scalars(select(Volume.id).where(Volume.class_id == row.id)).all())
    if count:
        raise FailedPrecondition(f"storage class {row.name!r} still holds {count} volume(s)")
    session.delete(row)
    return row.id


def set_class_status(session: Session, reference: str, status: str, now: float) -> StorageClass:
    """Enable (READY) or disable (DISABLED: no volume of it is created or mounted) a class."""
    row = find_class(session, reference)
    row.status = status
    row.updated_at = now
    return row
