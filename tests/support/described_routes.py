"""Which of the routes a process adds to the REST gateway its OpenAPI document leaves
undescribed: the routes are built only (their services are never called)."""

from __future__ import annotations

from aiohttp import web

from fuzzball_core.api.openapi import openapi_document
from fuzzball_core.api.rest import ExtraRoutes, build_rest_app


def undescribed_routes(extra: ExtraRoutes) -> tuple[set[str], list[str]]:
    """``METHOD /path`` of every route ``extra`` adds to a gateway, and of those among them
    that the gateway's document marks "(not described)"."""
    own = _operations(build_rest_app(object()))  # type: ignore[arg-type]
    app = build_rest_app(object(), extra_routes=[extra])  # type: ignore[arg-type]
    added = {label: operation for label, operation in _operations(app).items() if label not in own}
    return set(added), [label for label, summary in added.items() if summary == "(not described)"]


def _operations(app: web.Application) -> dict[str, str]:
    document = openapi_document(app, title="t", version="v")
    return {
        f"{method.upper()} {path}": operation["summary"]
        for path, methods in document["paths"].items()
        for method, operation in methods.items()
    }
