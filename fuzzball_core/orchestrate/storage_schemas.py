"""The JSON Schemas of the storage routes' bodies and replies, for the OpenAPI document.

They are Fuzzball's swagger definitions (``DriverDefinition``, ``StorageClassDefinition``,
``VolumeDefinition``, ``DriverInfoResponse``, ``StorageClassInfoResponse``,
``VolumeInfoResponse``...) as this server reads and writes them: bodies refuse fields they
do not define, enums list the values the handlers accept, and replies list the fields they
send (a VolumeInfoResponse adds ``storageClass``, ``scope``, ``node`` and ``sizeBytes``; an
answer that accepted a definition adds ``warnings``; deleting a volume answers whether its
data is ``retained``). A ``VolumeDefinition`` adds ``scope`` (``user`` or ``group``).
"""

from __future__ import annotations

from typing import Any

from fuzzball_core.api.openapi import JsonOperation, Query
from fuzzball_core.orchestrate import storage_catalog as catalog
from fuzzball_core.orchestrate import volume_removal, volumes

_STRING: dict[str, Any] = {"type": "string"}
_STRINGS: dict[str, Any] = {"type": "array", "items": _STRING}
_STRING_MAP: dict[str, Any] = {"type": "object", "additionalProperties": _STRING}
_BOOLEAN: dict[str, Any] = {"type": "boolean"}
_TIME: dict[str, Any] = {"type": "string", "format": "date-time"}
_ABSOLUTE_PATH: dict[str, Any] = {"type": "string", "pattern": "^/"}
_ADMIN_TAGS = ("storage administration",)
_TAGS = ("storage",)


def _object(properties: dict[str, Any], *, required: tuple[str, ...] = ()) -> dict[str, Any]:
    schema = {"type": "object", "properties": properties, "additionalProperties": False}
    return schema | ({"required": list(required)} if required else {})


def _enum(values: tuple[str, ...] | frozenset[str]) -> dict[str, Any]:
    return {"type": "string", "enum": sorted(values)}


def _name(pattern: str) -> dict[str, Any]:
    return {"type": "string", "pattern": f"^{pattern}$"}


_WARNINGS: dict[str, Any] = {
    "type": "array",
    "items": _STRING,
    "description": "the fields accepted that have no effect here, and why",
}
#: the ``{id}`` answer of a change, with the warnings of the definition it accepted
ID_REPLY = _object({"id": _STRING, "warnings": _WARNINGS})

# -- drivers ------------------------------------------------------------------------------------

DRIVER_DEFINITION = _object(
    {
        "version": _STRING,
        "name": _name(catalog.NAME_PATTERN),
        "description": _STRING,
        "image": _object({"uri": _STRING, "secret": _STRING}),
        "cmd": _STRING,
        "args": _STRINGS,
        "envs": _STRING_MAP,
        "mounts": {
            "type": "array",
            "items": _object(
                {"source": _ABSOLUTE_PATH, "destination": _ABSOLUTE_PATH, "options": _STRINGS},
                required=("source", "destination"),
            ),
        },
        "files": {
            "type": "array",
            "items": _object(
                {"path": _ABSOLUTE_PATH, "content": {"type": "string", "format": "byte"}}
                | {"secret": _STRING},
                required=("path",),
            ),
        },
    },
    required=("name",),
)
DRIVER_BODY = _object({"driver": DRIVER_DEFINITION}, required=("driver",))
DRIVER = _object(
    {"id": _STRING, "createTime": _TIME, "updateTime": _TIME, "driver": DRIVER_DEFINITION}
)

# -- storage classes ----------------------------------------------------------------------------

_CAPACITY = _object(
    {
        "size": {"type": "string", "format": "uint64", "pattern": r"^[0-9]{1,20}$"},
        "unit": _enum(("UNIT_UNSPECIFIED", *catalog.CAPACITY_UNITS)),
    }
)
CLASS_DEFINITION = _object(
    {
        "version": _STRING,
        "name": _name(catalog.NAME_PATTERN),
        "description": _STRING,
        "driver": {"type": "string", "description": "an installed driver's name or id"},
        "mount": _object(
            {
                "filesystem": _STRING,
                "options": _STRINGS,
                "user": _enum(catalog.OWNERSHIPS),
                "group": _enum(catalog.OWNERSHIPS),
                "permissions": _name(f"({catalog.PERMISSIONS_PATTERN})?"),
            }
        ),
        "access": _object(
            {"type": _enum(catalog.ACCESS_TYPES), "mode": _enum(catalog.ACCESS_MODES)}
        ),
        "parameters": _STRING_MAP,
        "secrets": _object({"default": _STRING}),
        "properties": _object({"retainOnDelete": _BOOLEAN, "persistent": _BOOLEAN}),
        "capabilities": {"type": "array", "items": _enum(("CAPABILITY_UNSPECIFIED",))},
        "scope": _enum(catalog.SCOPES),
        "capacity": _CAPACITY,
        "affinities": {
            "type": "array",
            "items": _object(
                {
                    "type": _enum(catalog.AFFINITY_TYPES),
                    "key": _STRING,
                    "filter": _STRING,
                }
            ),
        },
        "volumes": _object(
            {
                "nameArgs": {"type": "array", "items": _enum(catalog.NAME_ARGS)},
                "nameFormat": {"type": "string", "description": "one %s per nameArgs entry"},
                "maxByAccount": {
                    "type": "string",
                    "format": "int64",
                    "pattern": r"^[0-9]{1,19}$",
                    "description": "volumes per group (0: no limit)",
                },
            }
        ),
        "restricted": _BOOLEAN,
    },
    required=("name",),
)
CLASS_BODY = _object({"class": CLASS_DEFINITION}, required=("class",))
#: a new class names its driver (a change keeps the class's own when it names none)
CREATE_CLASS_BODY = _object(
    {"class": CLASS_DEFINITION | {"required": ["name", "driver"]}}, required=("class",)
)
_CLASS_STATUS = _enum((catalog.READY, catalog.DISABLED))
CLASS = _object(
    {
        "id": _STRING,
        "driverId": _STRING,
        "name": _STRING,
        "createTime": _TIME,
        "updateTime": _TIME,
        "class": CLASS_DEFINITION,
        "scope": _enum(catalog.SCOPES),
        "status": _CLASS_STATUS,
        "restricted": _BOOLEAN,
        "persistent": _BOOLEAN,
        "retain": _BOOLEAN,
    }
)
DESCRIBED_CLASS = _object({"class": CLASS, "pendingExecution": _BOOLEAN})
EMPTY_BODY = _object({})

# -- volumes ------------------------------------------------------------------------------------

_VOLUME_NAME = _name(volumes.VOLUME_NAME_PATTERN)
_VOLUME_SCOPES = _enum(tuple(volumes.SCOPES))
_VOLUME_TEXT = {
    "displayName": {"type": "string", "maxLength": volumes.MAX_DISPLAY_NAME},
    "description": {"type": "string", "maxLength": volumes.MAX_DESCRIPTION},
}
_CLUSTER_ID = {"type": "string", "description": "accepted with a warning: one cluster here"}
_VERSION = {"type": "string", "description": "accepted with a warning: volumes have one version"}
CREATE_VOLUME_BODY = _object(
    {
        "volume": _object(
            {
                "version": _VERSION,
                "name": _VOLUME_NAME,
                **_VOLUME_TEXT,
                "storageClassName": {
                    "type": "string",
                    "description": f"a persistent class ({catalog.PERSISTENT_CLASS} if empty)",
                },
                "scope": _VOLUME_SCOPES,
            },
            required=("name",),
        ),
        "clusterId": _CLUSTER_ID,
    },
    required=("volume",),
)
UPDATE_VOLUME_BODY = _object(
    {
        "volume": _object(
            {
                "version": _VERSION,
                "name": _VOLUME_NAME,
                **_VOLUME_TEXT,
                "storageClassName": {"type": "string", "maxLength": 0},
                "scope": {"type": "string", "maxLength": 0},
            }
        ),
        "clusterId": _CLUSTER_ID,
    },
    required=("volume",),
)
_VOLUME_STATUS = _enum(volumes.STATUSES)
VOLUME = _object(
    {
        "id": _STRING,
        "reference": _STRING,
        "name": _STRING,
        "displayName": _STRING,
        "description": _STRING,
        "createTime": _TIME,
        "accessTime": _TIME,
        "status": _enum((*volumes.STATUSES, volumes.LOST)),
        "storageClass": _STRING,
        "scope": _VOLUME_SCOPES,
        "node": _STRING,
        "sizeBytes": {"type": "string", "format": "int64"},
        "warnings": _WARNINGS,
    }
)
VOLUME_STATUS_BODY = _object({"status": _VOLUME_STATUS}, required=("status",))
VOLUME_STATUS = _object({"id": _STRING, "status": _VOLUME_STATUS})
DELETED_VOLUME = _object(
    {
        "id": _STRING,
        "retained": {"type": "boolean", "description": "its data is kept (retainOnDelete)"},
        "status": _enum((*volumes.STATUSES, volume_removal.DELETING, volume_removal.DELETED)),
    }
)


def _listing(key: str, item: dict[str, Any]) -> dict[str, Any]:
    return _object({key: {"type": "array", "items": item}, "pageToken": _STRING})


def _page(what: str) -> tuple[Query, ...]:
    return (
        Query("pageSize", "integer", f"at most this many {what} (1000 at most)"),
        Query("pageToken", "string", "the page after the one that answered this token"),
    )


# -- operations ---------------------------------------------------------------------------------

LIST_DRIVERS = JsonOperation(
    "the storage drivers, by name",
    _listing("drivers", DRIVER),
    query=_page("drivers"),
    tags=_ADMIN_TAGS,
)
INSTALL_DRIVER = JsonOperation(
    "install a storage driver (an installed fuzzball.storage_drivers plugin of its name)",
    ID_REPLY,
    DRIVER_BODY,
    tags=_ADMIN_TAGS,
)
GET_DRIVER = JsonOperation("one storage driver, by id or name", DRIVER, tags=_ADMIN_TAGS)
UPDATE_DRIVER = JsonOperation(
    "replace a storage driver's definition (it keeps its name)",
    ID_REPLY,
    DRIVER_BODY,
    tags=_ADMIN_TAGS,
)
UNINSTALL_DRIVER = JsonOperation(
    "uninstall a storage driver no storage class uses", ID_REPLY, tags=_ADMIN_TAGS
)
ADMIN_LIST_CLASSES = JsonOperation(
    "the storage classes, by name",
    _listing("classes", CLASS),
    query=_page("storage classes"),
    tags=_ADMIN_TAGS,
)
CREATE_CLASS = JsonOperation(
    "create a storage class (each field used, warned about or refused)",
    ID_REPLY,
    CREATE_CLASS_BODY,
    tags=_ADMIN_TAGS,
)
ADMIN_GET_CLASS = JsonOperation("one storage class, by id or name", CLASS, tags=_ADMIN_TAGS)
DESCRIBE_CLASS = JsonOperation(
    "one storage class, and whether a change of it is pending", DESCRIBED_CLASS, tags=_ADMIN_TAGS
)
UPDATE_CLASS = JsonOperation(
    "replace a storage class's definition (its name, driver and persistence stay while it "
    "holds volumes)",
    ID_REPLY,
    CLASS_BODY,
    tags=_ADMIN_TAGS,
)
DELETE_CLASS = JsonOperation(
    "delete a storage class that holds no volume", ID_REPLY, tags=_ADMIN_TAGS
)
ENABLE_CLASS = JsonOperation(
    "enable a storage class (the body, if any, is an empty object)",
    ID_REPLY,
    EMPTY_BODY,
    tags=_ADMIN_TAGS,
)
DISABLE_CLASS = JsonOperation(
    "disable a storage class: no volume of it is created or mounted (the body, if any, is an "
    "empty object)",
    ID_REPLY,
    EMPTY_BODY,
    tags=_ADMIN_TAGS,
)
LIST_CLASSES = JsonOperation(
    "the storage classes a member may use, by name",
    _listing("classes", CLASS),
    query=_page("storage classes"),
    tags=_TAGS,
)
GET_CLASS = JsonOperation("one storage class, by id or name", CLASS, tags=_TAGS)
LIST_VOLUMES = JsonOperation(
    "the caller's volumes and their group's, oldest first",
    _listing("volumes", VOLUME),
    query=_page("volumes"),
    tags=_TAGS,
)
CREATE_VOLUME = JsonOperation(
    "create a persistent volume", ID_REPLY, CREATE_VOLUME_BODY, tags=_TAGS
)
GET_VOLUME = JsonOperation("one of the caller's volumes", VOLUME, tags=_TAGS)
UPDATE_VOLUME = JsonOperation(
    "rename or describe one of the caller's volumes (its class and scope stay)",
    VOLUME,
    UPDATE_VOLUME_BODY,
    tags=_TAGS,
)
DELETE_VOLUME = JsonOperation(
    "delete one of the caller's volumes (its data too, unless its class retains it)",
    DELETED_VOLUME,
    tags=_TAGS,
)
SET_VOLUME_STATUS = JsonOperation(
    "enable or disable one of the caller's volumes (a disabled one is not mounted)",
    VOLUME_STATUS,
    VOLUME_STATUS_BODY,
    tags=_TAGS,
)
