"""The JSON Schemas of the secret routes' bodies and replies, for the OpenAPI document.

They are Fuzzball's swagger definitions (``CreateSecretRequest``, ``Update*SecretBody``,
``Secret``, ``ListSecretsResponse``, ``SecretIDResponse``) as this server reads and writes
them: a body sets exactly one of the type fields, refuses fields they do not define, and a
``Secret`` carries only the public parts of its type.
"""

from __future__ import annotations

from typing import Any

from fuzzball_core.api.openapi import JsonOperation, Query
from fuzzball_core.vocabulary import SecretScope, SecretType

_STRING: dict[str, Any] = {"type": "string"}
_STRINGS: dict[str, Any] = {"type": "array", "items": _STRING}
_TIME: dict[str, Any] = {"type": "string", "format": "date-time"}
_TAGS = ("secrets",)


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "additionalProperties": False}


_VALUE = _object({"value": _STRING})
_S3 = _object(
    {
        "accessKeyId": _STRING,
        "secretAccessKey": _STRING,
        "region": _STRING,
        "endpoint": _STRING,
        "sessionToken": _STRING,
    }
)
_HTTP = _object(
    {"trustedDomains": _STRINGS, "username": _STRING, "password": _STRING, "token": _STRING}
)
_IMAGE = _object({"trustedDomains": _STRINGS, "username": _STRING, "password": _STRING})
_MAP = _object({"map": {"type": "object", "additionalProperties": _STRING}})
_DECRYPTION = _object({"passphrase": _STRING, "pem": _STRING})
_UPDATABLE = {"value": _VALUE, "s3": _S3, "http": _HTTP, "image": _IMAGE, "map": _MAP}

CREATE_BODY = _object(
    {
        "name": _STRING,
        "scope": {"type": "string", "enum": [s.value for s in SecretScope]},
        "private": {"type": "boolean"},
        **_UPDATABLE,
        "decryption": _DECRYPTION,
    }
)
UPDATE_BODY = _object(_UPDATABLE)
SECRET = _object(
    {
        "id": _STRING,
        "createTime": _TIME,
        "updateTime": _TIME,
        "name": _STRING,
        "scope": {"type": "string", "enum": [s.value for s in SecretScope]},
        "type": {"type": "string", "enum": [t.value for t in SecretType]},
        "reference": _STRING,
        "private": {"type": "boolean"},
        "s3": _object({"region": _STRING, "endpoint": _STRING}),
        "http": _object({"trustedDomains": _STRINGS, "username": _STRING}),
        "image": _object({"trustedDomains": _STRINGS, "username": _STRING}),
    }
)
SECRET_ID = _object({"id": _STRING})
SECRET_LIST = _object({"secrets": {"type": "array", "items": SECRET}, "pageToken": _STRING})
_PAGE = (
    Query("pageSize", "integer", "at most this many secrets (1000 at most)"),
    Query("pageToken", "string", "the page after the one that answered this token"),
)

CREATE = JsonOperation(
    "create a secret (its value is never read back)", SECRET_ID, CREATE_BODY, tags=_TAGS
)
LIST = JsonOperation(
    "the secrets the caller sees, by scope and name", SECRET_LIST, query=_PAGE, tags=_TAGS
)
GET = JsonOperation("one secret: its public parts, never its value", SECRET, tags=_TAGS)
UPDATE = JsonOperation(
    "replace a secret's value with one of its type", SECRET_ID, UPDATE_BODY, tags=_TAGS
)
DELETE = JsonOperation("delete a secret", SECRET_ID, tags=_TAGS)
