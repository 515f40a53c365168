"""Endpoints over REST, for ``fuzzball endpoint`` (the v3.3 swagger has no endpoint routes;
these follow its conventions: camelCase JSON, google.rpc.Status errors):

* ``POST /v3/endpoints`` ``{"name", "scope", "type", "strategy"}``: reserve a persistent
  endpoint; answers the Endpoint;
* ``GET /v3/endpoints`` (``workflowId`` narrows it to one workflow's): ``{"endpoints": [...]}``;
* ``GET /v3/endpoints/{ref}`` and ``DELETE /v3/endpoints/{ref}``: one endpoint by id, or a
  persistent one by name.

An Endpoint is ``{"id", "name", "url", "scope", "type", "protocol", "persistent",
"strategy", "workflowId", "service", "pendingWorkflowId", "createTime", "updateTime"}``.
Every route answers only the caller's account's endpoints (another's: 404).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from fuzzball_core.api.json_body import parse_json_body
from fuzzball_core.api.openapi import JsonOperation, Query, documented
from fuzzball_core.api.rest import ExtraRoutes
from fuzzball_core.errors import InvalidArgument
from fuzzball_core.orchestrate import endpoints
from fuzzball_core.orchestrate.endpoint_urls import EndpointUrls
from fuzzball_core.orchestrate.engine import Engine
from fuzzball_core.service.permissions import require
from fuzzball_core.service.views import Principal
from fuzzball_core.store.models import ServiceEndpoint
from fuzzball_core.vocabulary import Permission

_CREATE_FIELDS = ("name", "scope", "type", "strategy")

# -- the JSON Schemas of the bodies and replies, for /v3/openapi.json ----------------------

_STRING: dict[str, Any] = {"type": "string"}
_TIME: dict[str, Any] = {"type": "string", "format": "date-time"}
_TAGS = ("endpoints",)


def _object(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return schema


def _enum(values: tuple[str, ...]) -> dict[str, Any]:
    return {"type": "string", "enum": list(values)}


ENDPOINT_SCHEMA = _object(
    {
        "id": _STRING,
        "name": _STRING,
        "url": _STRING,
        "scope": _enum(endpoints.SCOPES),
        "type": _enum(endpoints.KINDS),
        "protocol": _enum(endpoints.PROTOCOLS),
        "persistent": {"type": "boolean"},
        "strategy": _enum(endpoints.STRATEGIES),
        "workflowId": {"type": "string", "nullable": True},
        "service": {"type": "string", "nullable": True},
        "pendingWorkflowId": {"type": "string", "nullable": True},
        "createTime": _TIME,
        "updateTime": _TIME,
    }
)
CREATE_SCHEMA = _object(
    {
        "name": {"type": "string", "pattern": "^[a-z0-9_-]+$"},
        "scope": _enum(endpoints.SCOPES),
        "type": _enum(endpoints.KINDS),
        "strategy": _enum(endpoints.STRATEGIES),
    },
    required=("name",),
)
CREATE = JsonOperation(
    "reserve a persistent endpoint (a URL a workflow attaches to)",
    ENDPOINT_SCHEMA,
    CREATE_SCHEMA,
    tags=_TAGS,
)
LIST = JsonOperation(
    "the endpoints of the caller's account",
    _object({"endpoints": {"type": "array", "items": ENDPOINT_SCHEMA}}),
    query=(Query("workflowId", "string", "only this workflow's endpoints"),),
    tags=_TAGS,
)
DESCRIBE = JsonOperation(
    "one endpoint, by id or (a persistent one) by name", ENDPOINT_SCHEMA, tags=_TAGS
)
DELETE = JsonOperation(
    "delete an endpoint, by id or (a persistent one) by name", _object({}), tags=_TAGS
)


def endpoint_routes(engine: Engine, urls: EndpointUrls) -> ExtraRoutes:
    """The endpoint routes over ``engine``'s store, for the REST gateway."""
    return ExtraRoutes(
        add=lambda app, base, principal_of: add_endpoint_routes(
            app, base, engine, urls, principal_of
        )
    )


def _time(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def endpoint_json(view: endpoints.EndpointView, url: str) -> dict[str, Any]:
    """An Endpoint as the routes answer it."""
    return {
        "id": view.id,
        "name": view.name,
        "url": url,
        "scope": view.scope,
        "type": view.type,
        "protocol": view.protocol,
        "persistent": view.persistent,
        "strategy": view.strategy,
        "workflowId": view.workflow_id,
        "service": view.service,
        "pendingWorkflowId": view.pending_workflow_id,
        "createTime": _time(view.created_at),
        "updateTime": _time(view.updated_at),
    }


def _url(urls: EndpointUrls, view: endpoints.EndpointView) -> str:
    return urls.url(ServiceEndpoint(id=view.id, kind=view.type))


def _create_body(data: Any) -> dict[str, str]:
    if not isinstance(data, dict):
        raise InvalidArgument("the body must be a JSON object")
    unknown = sorted(set(data) - set(_CREATE_FIELDS))
    if unknown:
        raise InvalidArgument(f"{unknown[0]}: unknown field (known: {', '.join(_CREATE_FIELDS)})")
    for field, value in data.items():
        if not isinstance(value, str):
            raise InvalidArgument(f"{field}: must be a string")
    if not data.get("name"):
        raise InvalidArgument("name: required")
    return data


def add_endpoint_routes(
    app: web.Application,
    base: str,
    engine: Engine,
    urls: EndpointUrls,
    principal_of: Callable[[web.Request], Principal],
) -> None:
    """Add the endpoint routes under ``base`` (``/v3``)."""

    def answer(view: endpoints.EndpointView) -> web.Response:
        return web.json_response(endpoint_json(view, _url(urls, view)))

    @documented(CREATE)
    async def create(request: web.Request) -> web.Response:
        who = principal_of(request)
        require(who, Permission.RUN_WORKFLOWS, "create endpoints")
        body = _create_body(parse_json_body(await request.read()))
        problem = urls.subdomain_problem()
        if str(body.get("type", "")).lower() == "subdomain" and problem:
            raise InvalidArgument(f"type: subdomain: {problem}; use type path")

        def add(tx: Any) -> endpoints.EndpointView:
            row = endpoints.create(
                tx.session,
                who,
                body["name"],
                scope=body.get("scope") or "group",
                kind=body.get("type") or "path",
                strategy=body.get("strategy") or "start",
                now=tx.now,
            )
            return endpoints.view(row)

        return answer(engine.change(add))

    @documented(LIST)
    async def listing(request: web.Request) -> web.Response:
        who = principal_of(request)
        workflow_id = request.query.get("workflowId") or None
        if workflow_id is not None and not endpoints.plausible_reference(workflow_id):
            raise InvalidArgument("workflowId: not a workflow id")
        with engine.sessions() as session:
            views = endpoints.listed(session, who, workflow_id)
        return web.json_response({"endpoints": [endpoint_json(v, _url(urls, v)) for v in views]})

    @documented(DESCRIBE)
    async def describe(request: web.Request) -> web.Response:
        who = principal_of(request)
        with engine.sessions() as session:
            view = endpoints.view(endpoints.find(session, who, request.match_info["ref"]))
        return answer(view)

    @documented(DELETE)
    async def delete(request: web.Request) -> web.Response:
        who = principal_of(request)
        require(who, Permission.RUN_WORKFLOWS, "delete endpoints")
        reference = request.match_info["ref"]
        engine.change(lambda tx: endpoints.delete(tx.session, who, reference))
        return web.json_response({})

    app.router.add_post(f"{base}/endpoints", create)
    app.router.add_get(f"{base}/endpoints", listing)
    app.router.add_get(f"{base}/endpoints/{{ref}}", describe)
    app.router.add_delete(f"{base}/endpoints/{{ref}}", delete)
