"""Secrets over REST, shaped as the swagger's SecretService and AdminSecretService.

For each family (``/v3/secrets``, ``/v3/organization/secrets``, ``/v3/admin/cluster/secrets``):

* ``PUT BASE`` (a CreateSecretRequest) answers a SecretIDResponse ``{"id"}``;
* ``GET BASE`` answers a ListSecretsResponse ``{"secrets": [Secret...], "pageToken"}``
  (``pageSize``/``pageToken`` page it; ``filter`` and ``orderBy`` are refused, naming them:
  secrets are listed by scope and name);
* ``GET BASE/{id}`` a Secret, ``PATCH BASE/{id}`` (an Update*SecretBody) and
  ``DELETE BASE/{id}`` a SecretIDResponse.

A Secret never carries a value: only ``s3`` (region, endpoint), ``http`` and ``image``
(username, trustedDomains). Who may do what is the service's (:mod:`fuzzball_core.service.
secrets`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from fuzzball_core.api.json_body import parse_json_body
from fuzzball_core.api.list_pages import whole_number
from fuzzball_core.api.openapi import documented
from fuzzball_core.api.rest import ExtraRoutes
from fuzzball_core.errors import InvalidArgument
from fuzzball_core.orchestrate import secret_schemas as schema
from fuzzball_core.service.secrets import Family, Secrets, SecretView
from fuzzball_core.service.views import Principal

#: each family's path under the API's base
FAMILY_PATHS = {
    Family.SECRETS: "/secrets",
    Family.ORGANIZATION: "/organization/secrets",
    Family.CLUSTER: "/admin/cluster/secrets",
}
#: the most secrets one page lists
MAX_PAGE_SIZE = 1000


def secret_routes(secrets: Secrets) -> ExtraRoutes:
    """The secret routes over ``secrets``, for the REST gateway."""
    return ExtraRoutes(
        add=lambda app, base, principal_of: add_secret_routes(app, base, secrets, principal_of)
    )


def secret_json(view: SecretView) -> dict[str, Any]:
    """A Secret as the swagger writes it: public parts only."""
    body: dict[str, Any] = {
        "id": view.id,
        "createTime": _rfc3339(view.created_at),
        "updateTime": _rfc3339(view.updated_at),
        "name": view.name,
        "scope": view.scope,
        "type": view.type,
        "reference": view.reference,
        "private": view.private,
    }
    body.update(view.info)
    return body


def add_secret_routes(
    app: web.Application,
    base: str,
    secrets: Secrets,
    principal_of: Callable[[web.Request], Principal],
) -> None:
    """Add the three families' routes under ``base`` (``/v3``)."""
    for family, path in FAMILY_PATHS.items():
        handlers = _Handlers(secrets, family, principal_of)
        app.router.add_put(f"{base}{path}", handlers.create)
        app.router.add_get(f"{base}{path}", handlers.list)
        app.router.add_get(f"{base}{path}/{{id:[^/:]+}}", handlers.get)
        app.router.add_patch(f"{base}{path}/{{id:[^/:]+}}", handlers.update)
        app.router.add_delete(f"{base}{path}/{{id:[^/:]+}}", handlers.delete)


class _Handlers:
    """The handlers of one family; the service's calls run in worker threads (each one is
    a database round trip and a decryption)."""

    def __init__(
        self,
        secrets: Secrets,
        family: Family,
        principal_of: Callable[[web.Request], Principal],
    ) -> None:
        self.secrets = secrets
        self.family = family
        self.principal_of = principal_of

    @documented(schema.CREATE)
    async def create(self, request: web.Request) -> web.Response:
        body = await _object_body(request)
        who = self.principal_of(request)
        new_id = await asyncio.to_thread(self.secrets.create, who, self.family, body)
        return web.json_response({"id": new_id})

    @documented(schema.LIST)
    async def list(self, request: web.Request) -> web.Response:
        for refused in ("filter", "orderBy"):
            if request.query.get(refused):
                raise InvalidArgument(
                    f"{refused}: not supported; secrets are listed by scope and name"
                )
        size = whole_number(request.query, "pageSize") or MAX_PAGE_SIZE
        start = whole_number(request.query, "pageToken")
        who = self.principal_of(request)
        views = await asyncio.to_thread(self.secrets.list, who, self.family)
        page = views[start : start + min(size, MAX_PAGE_SIZE)]
        following = start + len(page)
        return web.json_response(
            {
                "secrets": [secret_json(view) for view in page],
                "pageToken": str(following) if following < len(views) else "",
            }
        )

    @documented(schema.GET)
    async def get(self, request: web.Request) -> web.Response:
        who, secret_id = self.principal_of(request), request.match_info["id"]
        view = await asyncio.to_thread(self.secrets.get, who, self.family, secret_id)
        return web.json_response(secret_json(view))

    @documented(schema.UPDATE)
    async def update(self, request: web.Request) -> web.Response:
        body = await _object_body(request)
        who, secret_id = self.principal_of(request), request.match_info["id"]
        await asyncio.to_thread(self.secrets.update, who, self.family, secret_id, body)
        return web.json_response({"id": secret_id})

    @documented(schema.DELETE)
    async def delete(self, request: web.Request) -> web.Response:
        who, secret_id = self.principal_of(request), request.match_info["id"]
        await asyncio.to_thread(self.secrets.delete, who, self.family, secret_id)
        return web.json_response({"id": secret_id})


async def _object_body(request: web.Request) -> dict[str, Any]:
    body = parse_json_body(await request.read())
    if not isinstance(body, dict):
        raise InvalidArgument("request body: expected a JSON object")
    return body


def _rfc3339(seconds: float) -> str:
    return (
        datetime.fromtimestamp(seconds, UTC)
        .isoformat(timespec="microseconds")
        .replace("+00:00", "Z")
    )
