"""Reading a served OpenAPI document in tests: which operations of some paths are not
described, and whether a real reply is what an operation's document says it answers. A
process's extra routes can also be read from a gateway built only (:func:`document_adding`)."""

from __future__ import annotations

from typing import Any

import httpx
import jsonschema
from aiohttp import web

from fuzzball_core.api.openapi import openapi_document
from fuzzball_core.api.rest import ExtraRoutes, build_rest_app

NOT_DESCRIBED = "(not described)"


def openapi_of(rest_url: str, token: str) -> dict[str, Any]:
    """The OpenAPI document a gateway serves (``rest_url``: its ``.../v3``)."""
    reply = httpx.get(
        f"{rest_url}/openapi.json", headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    reply.raise_for_status()
    document: dict[str, Any] = reply.json()
    return document


def document_adding(extra: ExtraRoutes) -> tuple[dict[str, Any], set[str]]:
    """The OpenAPI document of a gateway ``extra`` adds its routes to, built and never served
    (the routes' services are never called), and ``METHOD /path`` of the routes it adds."""
    own = _operations(build_rest_app(object()))  # type: ignore[arg-type]
    app = build_rest_app(object(), extra_routes=[extra])  # type: ignore[arg-type]
    return openapi_document(app, title="t", version="v"), _operations(app) - own


def _operations(app: web.Application) -> set[str]:
    return {
        f"{route.method} {route.resource.canonical}"
        for route in app.router.routes()
        if route.method != "HEAD" and route.resource is not None
    }


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
