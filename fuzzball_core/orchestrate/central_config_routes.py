"""The central configuration over REST, shaped as the swagger's AdminCentralConfigService,
for cluster administrators (``administer_cluster``):

* ``GET /admin/centralconfig[?revision=N]``: ``{"config"}``, the document (base64) of
  revision N, or of the newest for 0 or none, its credentials shown as ``<redacted>``;
* ``POST /admin/centralconfig`` ``{"config"}``: a new revision, in force at once (a
  credential sent as ``<redacted>`` keeps its stored value);
* ``GET /admin/centralconfig/revisions``: ``{"revisions": [{"revision", "createdTime"}]}``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from collections.abc import Callable

from aiohttp import web

from fuzzball_core.api.json_body import parse_json_body
from fuzzball_core.api.openapi import documented
from fuzzball_core.api.rest import ExtraRoutes
from fuzzball_core.errors import InvalidArgument
from fuzzball_core.orchestrate import central_config_schemas as schema
from fuzzball_core.orchestrate.central_config import CentralConfig, revision_json
from fuzzball_core.service.permissions import require
from fuzzball_core.service.views import Principal
from fuzzball_core.vocabulary import Permission

#: the largest document accepted, in bytes
MAX_DOCUMENT = 1024 * 1024
#: Most digits a ``revision`` query may have: any more would not fit the store's 64 bits.
MAX_REVISION_DIGITS = 18


def central_config_routes(central: CentralConfig) -> ExtraRoutes:
    """The central configuration routes over ``central``."""
    return ExtraRoutes(
        add=lambda app, base, principal_of: _Handlers(central, principal_of).add(app, base)
    )


class _Handlers:
    def __init__(
        self, central: CentralConfig, principal_of: Callable[[web.Request], Principal]
    ) -> None:
        self.central = central
        self.principal_of = principal_of

    def add(self, app: web.Application, base: str) -> None:
        router = app.router
        router.add_get(f"{base}/admin/centralconfig", self.get_config)
        router.add_post(f"{base}/admin/centralconfig", self.set_config)
        router.add_get(f"{base}/admin/centralconfig/revisions", self.list_revisions)

    def _admin(self, request: web.Request, doing: str) -> None:
        require(self.principal_of(request), Permission.ADMINISTER_CLUSTER, doing)

    @documented(schema.GET_CONFIG)
    async def get_config(self, request: web.Request) -> web.Response:
        self._admin(request, "read the central configuration")
        raw = request.query.get("revision", "0")
        # ASCII digits only ("²" is a digit to isdigit, not to int) and few enough for the
        # store's 64-bit column
        if not (raw.isascii() and raw.isdigit()) or len(raw) > MAX_REVISION_DIGITS:
            raise InvalidArgument(
                f"revision: expected a whole number of at most {MAX_REVISION_DIGITS} digits, "
                f"got {raw[:40]!r}"
            )
        document = await asyncio.to_thread(self.central.document, int(raw))
        encoded = base64.b64encode(document.encode()).decode()
        return web.json_response({"config": encoded})

    @documented(schema.SET_CONFIG)
    async def set_config(self, request: web.Request) -> web.Response:
        self._admin(request, "set the central configuration")
        body = parse_json_body(await request.read())
        if not isinstance(body, dict):
            raise InvalidArgument("request body: expected a JSON object")
        unknown = sorted(set(body) - {"config"})
        if unknown:
            raise InvalidArgument(f"{', '.join(unknown)}: not a field of this request")
        encoded = body.get("config", "")
        if not isinstance(encoded, str):
            raise InvalidArgument("config: expected base64 text")
        try:
            raw = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidArgument("config: not valid base64") from None
        if len(raw) > MAX_DOCUMENT:
            raise InvalidArgument(f"config: larger than {MAX_DOCUMENT} bytes")
        try:
            document = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidArgument("config: not UTF-8 text") from None
        await asyncio.to_thread(self.central.set, document)
        return web.json_response({})

    @documented(schema.LIST_REVISIONS)
    async def list_revisions(self, request: web.Request) -> web.Response:
        self._admin(request, "list the central configuration's revisions")
        revisions = await asyncio.to_thread(self.central.revisions)
        return web.json_response({"revisions": [revision_json(r) for r in revisions]})
