"""The JSON Schemas of the central configuration routes' bodies and replies, for the
OpenAPI document.

They are Fuzzball's swagger definitions (``CentralConfig``, ``ListCentralConfigRevisions``)
as this server reads and writes them: the document travels as base64 text in ``config``
(``format: byte``, the proto3 JSON mapping of bytes), which must decode to UTF-8 text of at
most :data:`~fuzzball_core.orchestrate.central_config_routes.MAX_DOCUMENT` bytes; a body
refuses fields other than ``config``, as the handler does, and one without it sets an empty
document.
"""

from __future__ import annotations

from typing import Any

from fuzzball_core.api.openapi import JsonOperation, Query

_TAGS = ("administration",)


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "additionalProperties": False}


CENTRAL_CONFIG = _object({"config": {"type": "string", "format": "byte"}})
EMPTY = _object({})
REVISION = _object(
    {
        "revision": {"type": "string", "format": "uint64", "pattern": r"^[0-9]+$"},
        "createdTime": {"type": "string", "format": "date-time"},
    }
)
REVISIONS = _object({"revisions": {"type": "array", "items": REVISION}})

GET_CONFIG = JsonOperation(
    "the central configuration document (base64), its credentials shown as <redacted>",
    CENTRAL_CONFIG,
    query=(
        Query(
            "revision",
            "string",
            "the revision to read, a whole number of at most 18 digits (0 or none: the newest)",
        ),
    ),
    tags=_TAGS,
)
SET_CONFIG = JsonOperation(
    "a new revision of the central configuration, in force at once (a credential sent as"
    " <redacted> keeps its stored value)",
    EMPTY,
    CENTRAL_CONFIG,
    tags=_TAGS,
)
LIST_REVISIONS = JsonOperation(
    "the central configuration's revisions, with when each was made", REVISIONS, tags=_TAGS
)
