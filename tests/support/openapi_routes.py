"""Reading a served OpenAPI document in tests: which operations of some paths are not
described, and whether a real reply is what an operation's document says it answers."""

from __future__ import annotations

from typing import Any

import httpx
import jsonschema

NOT_DESCRIBED = "(not described)"


def openapi_of(rest_url: str, token: str) -> dict[str, Any]:
    """The OpenAPI document a gateway serves (``rest_url``: its ``.../v3``)."""
    reply = httpx.get(
        f"{rest_url}/openapi.json", headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    reply.raise_for_status()
    document: dict[str, Any] = reply.json()
    return document


def undescribed(document: dict[str, Any], operations: set[str]) -> set[str]:
    """Those of ``operations`` (``METHOD /path``) the document leaves out or does not
    describe."""
    found = {
        f"{method.upper()} {path}"
        for path, methods in document["paths"].items()
        for method, entry in methods.items()
        if entry.get("summary") != NOT_DESCRIBED
    }
    return operations - found


def check_reply(
    document: dict[str, Any], operation: str, reply: httpx.Response, status: int = 200
) -> None:
    """``reply`` (to ``operation``, ``METHOD /path`` as the document names it) has the
    ``status`` the document lists, with a JSON body its schema for that status accepts."""
    method, path = operation.split(" ", 1)
    assert reply.status_code == status, reply.text
    answers = document["paths"][path][method.lower()]["responses"][str(status)]
    schema = answers["content"]["application/json"]["schema"]
    jsonschema.validate(reply.json(), schema)
