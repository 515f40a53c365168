"""The JSON Schemas of the provisioner routes' bodies and replies, for the OpenAPI document.

They are Fuzzball's swagger definitions (``ProvisionerDefinition``,
``ListProvisionerDefinitionsResponse``, ``AdminProvisionerInstance``,
``AdminCreateProvisionerInstancesRequest``...) as this server writes and reads them: 64-bit
integers are written as decimal strings (the proto3 JSON mapping), a definition's resource
is its configured shape (``total`` and ``annotations`` only), and two extensions are listed
where they appear (a definition's ``startupTimeEstimate``, an instance's ``detail``). The
create body refuses fields it does not define, as the handler does.
"""

from __future__ import annotations

from typing import Any

from fuzzball_core.api.openapi import JsonOperation, Query
from fuzzball_core.vocabulary import InstanceState

_STRING: dict[str, Any] = {"type": "string"}
_STRING_MAP: dict[str, Any] = {"type": "object", "additionalProperties": _STRING}
_TIME: dict[str, Any] = {"type": "string", "format": "date-time"}
#: an int64 as the proto3 JSON mapping writes it
_INT64_TEXT: dict[str, Any] = {"type": "string", "format": "int64", "pattern": r"^[0-9]+$"}
#: a whole number of at least 1 as the create body takes it: a JSON number, or a decimal
#: string of at most 9 digits (how the proto3 JSON mapping may send an int64)
_AT_LEAST_ONE: dict[str, Any] = {
    "oneOf": [
        {"type": "integer", "minimum": 1},
        {"type": "string", "pattern": r"^0*[1-9][0-9]*$", "maxLength": 9},
    ]
}
_TAGS = ("provisioner",)
_ADMIN_TAGS = ("provisioner", "administration")


def _object(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        schema["required"] = list(required)
    return schema


_RESOURCE = _object(
    {
        "cpu": _object({"cores": {"type": "integer", "minimum": 1}}),
        "mem": _object({"bytes": _INT64_TEXT}),
        "devices": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}},
        "exclusive": {"type": "boolean"},
    }
)
DEFINITION = _object(
    {
        "id": _STRING,
        "backendId": _STRING,
        "resource": _object({"total": _RESOURCE, "annotations": _STRING_MAP}),
        "costPerHourEstimate": {"type": "number", "format": "double", "minimum": 0},
        # an extension of the swagger's ProvisionerDefinition: seconds, as ttl
        "startupTimeEstimate": _INT64_TEXT,
        "exclusive": {"type": "string", "enum": ["EXCLUSIVITY_NONE", "EXCLUSIVITY_JOB"]},
        "ttl": _INT64_TEXT,
        "ttlBuffer": _INT64_TEXT,
    }
)
DEFINITION_LIST = _object(
    {"definitions": {"type": "array", "items": DEFINITION}, "pageToken": _STRING}
)
INSTANCE = _object(
    {
        "id": _STRING,
        "definitionId": _STRING,
        "state": {
            "type": "string",
            "enum": [f"ADMIN_PROVISIONER_INSTANCE_STATE_{s.value}" for s in InstanceState],
        },
        "annotations": _STRING_MAP,
        "createTime": _TIME,
        "updateTime": _TIME,
        "deleteTime": _TIME,
        # an extension of the swagger's AdminProvisionerInstance: why it is in its state
        "detail": _STRING,
    }
)
INSTANCE_LIST = _object({"instances": {"type": "array", "items": INSTANCE}, "pageToken": _STRING})
CREATE_BODY = _object(
    {
        "definitionId": {"type": "string", "minLength": 1},
        "count": _AT_LEAST_ONE,
        "annotations": _STRING_MAP,
        "ttl": _AT_LEAST_ONE,
        "backendDirectives": _STRING_MAP,
    },
    required=("definitionId",),
)
CREATED = _object({"ids": {"type": "array", "items": _STRING}, "transactionId": _STRING})
INSTANCE_ID = _object({"id": _STRING})

_PAGE = (
    Query("pageSize", "integer", "at most this many items (0 or none: 1000, the most)"),
    Query("pageToken", "string", "the pageToken the previous page answered (a whole number)"),
    Query("orderBy", "string", "not supported: refused when set (listed oldest first)"),
    Query("filter", "string", "not supported: refused when set"),
)

LIST_DEFINITIONS = JsonOperation(
    "the provisioner definitions: the nodes that could be started for jobs",
    DEFINITION_LIST,
    query=_PAGE,
    tags=_TAGS,
)
GET_DEFINITION = JsonOperation("one provisioner definition", DEFINITION, tags=_TAGS)
ADMIN_LIST_DEFINITIONS = JsonOperation(
    "the provisioner definitions (provision_nodes)", DEFINITION_LIST, query=_PAGE, tags=_ADMIN_TAGS
)
ADMIN_GET_DEFINITION = JsonOperation(
    "one provisioner definition (provision_nodes)", DEFINITION, tags=_ADMIN_TAGS
)
RESET_RESOURCE = JsonOperation(
    "refused, saying why: a definition's resource is its configured shape, and nothing was"
    " learned from its nodes to reset",
    DEFINITION,
    tags=_ADMIN_TAGS,
)
LIST_INSTANCES = JsonOperation(
    "the provisioned instances, oldest first, with their state and why",
    INSTANCE_LIST,
    query=_PAGE,
    tags=_ADMIN_TAGS,
)
CREATE_INSTANCES = JsonOperation(
    "ask a definition's driver for instances (within its max-nodes); a field the driver"
    " refuses is named, and nothing is created",
    CREATED,
    CREATE_BODY,
    tags=_ADMIN_TAGS,
)
GET_INSTANCE = JsonOperation("one provisioned instance", INSTANCE, tags=_ADMIN_TAGS)
DELETE_INSTANCE = JsonOperation(
    "delete a provisioned instance (its driver is asked once)", INSTANCE_ID, tags=_ADMIN_TAGS
)
