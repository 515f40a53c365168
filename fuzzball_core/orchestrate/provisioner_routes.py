"""Provisioner definitions and instances over REST, shaped as the swagger's
ProvisionerService and AdminProvisionerService.

* ``GET /provisioner/definitions[/{id}]``: the definitions, for anyone who may run
  workflows (what nodes could be started for their jobs);
* ``GET /admin/provisioner/definitions[/{id}]``: the same, for cluster administrators and
  the provisioner service account (``provision_nodes``);
* ``POST /admin/provisioner/definitions/{id}/reset-resource``: refused, saying why (a
  definition's resource is its configured shape; nothing was learned to reset);
* ``POST /admin/provisioner/instances`` (``definitionId``, ``count``, ``annotations``,
  ``ttl``, ``backendDirectives``) answers ``{"ids"}`` (400 naming the field the driver
  refuses, with nothing created); ``GET`` lists them with their state and, as the extension
  ``detail``, why (a create's failure); ``GET``/``DELETE .../{id}`` reads or deletes one
  (``provision_nodes``).

Definitions come from ``provisioner.definitions`` in the configuration; without any, the
lists are empty and every id is unknown.
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
from fuzzball_core.config import ProvisionerDefinitionConfig
from fuzzball_core.errors import FailedPrecondition, InvalidArgument, NotFound
from fuzzball_core.orchestrate import provisioner_schemas as schema
from fuzzball_core.orchestrate.provisioning import InstanceRecord, Provisioning
from fuzzball_core.service.permissions import require
from fuzzball_core.service.views import Principal
from fuzzball_core.vocabulary import InstanceState, Permission

#: the most items one page lists
MAX_PAGE_SIZE = 1000
_STATE_PREFIX = "ADMIN_PROVISIONER_INSTANCE_STATE_"
_CREATE_FIELDS = frozenset({"definitionId", "count", "annotations", "ttl", "backendDirectives"})


def provisioner_routes(provisioning: Provisioning | None) -> ExtraRoutes:
    """The provisioner routes over ``provisioning`` (None: no definitions configured)."""
    return ExtraRoutes(
        add=lambda app, base, principal_of: _Handlers(provisioning, principal_of).add(app, base)
    )


def rfc3339(seconds: float) -> str:
    """A time as the swagger writes it."""
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def definition_json(definition: ProvisionerDefinitionConfig) -> dict[str, Any]:
    """A ProvisionerDefinition: the node shape as a ResourceShowResponse's ``total``."""
    body: dict[str, Any] = {
        "id": definition.id,
        "backendId": definition.driver,
        "resource": {
            "total": {
                "cpu": {"cores": definition.cores},
                "mem": {"bytes": str(definition.memory)},
                "devices": dict(definition.devices),
                "exclusive": definition.exclusive,
            },
            "annotations": dict(definition.annotations),
        },
        "costPerHourEstimate": definition.cost_per_hour_estimate,
        # an extension of the swagger's ProvisionerDefinition (int64 seconds, as ttl)
        "startupTimeEstimate": str(int(definition.startup_time_estimate)),
        "exclusive": "EXCLUSIVITY_JOB" if definition.exclusive else "EXCLUSIVITY_NONE",
    }
    if definition.ttl is not None:
        body["ttl"] = str(int(definition.ttl))
    if definition.ttl_buffer is not None:
        body["ttlBuffer"] = str(int(definition.ttl_buffer))
    return body


def instance_json(record: InstanceRecord) -> dict[str, Any]:
    """An AdminProvisionerInstance."""
    body: dict[str, Any] = {
        "id": record.id,
        "definitionId": record.definition_id,
        "state": _STATE_PREFIX + record.state.value,
        "annotations": dict(record.annotations),
        "createTime": rfc3339(record.requested_at),
        "updateTime": rfc3339(record.history[-1][0] if record.history else record.requested_at),
    }
    if record.deleted_at is not None:
        body["deleteTime"] = rfc3339(record.deleted_at)
    if record.detail:
        # an extension of the swagger's AdminProvisionerInstance, which has no field for it:
        # why the instance is in its state (the driver's error for ERROR, a lost answer for
        # CREATING, a failed delete for DELETING)
        body["detail"] = record.detail
    return body


def _page(request: web.Request, items: list[Any]) -> tuple[list[Any], str]:
    for refused in ("filter", "orderBy"):
        if request.query.get(refused):
            raise InvalidArgument(f"{refused}: not supported; listed oldest first")
    size = whole_number(request.query, "pageSize") or MAX_PAGE_SIZE
    start = whole_number(request.query, "pageToken")
    page = items[start : start + min(size, MAX_PAGE_SIZE)]
    following = start + len(page)
    return page, str(following) if following < len(items) else ""


def _string_map(body: dict[str, Any], name: str) -> dict[str, str]:
    # absent or null is empty (the proto3 JSON mapping); any other non-object is refused
    value = body.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise InvalidArgument(f"{name}: expected an object of strings")
    return value


def _whole(body: dict[str, Any], name: str, default: int | None) -> int | None:
    value = body.get(name)
    if value is None:
        return default
    # int64 fields arrive as JSON numbers or, in the proto3 JSON mapping, as strings
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) < 10:
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidArgument(f"{name}: expected a whole number of at least 1")
    return value


class _Handlers:
    def __init__(
        self, provisioning: Provisioning | None, principal_of: Callable[[web.Request], Principal]
    ) -> None:
        self.provisioning = provisioning
        self.principal_of = principal_of

    def add(self, app: web.Application, base: str) -> None:
        router = app.router
        router.add_get(f"{base}/provisioner/definitions", self.list_definitions)
        router.add_get(f"{base}/provisioner/definitions/{{id}}", self.get_definition)
        router.add_get(f"{base}/admin/provisioner/definitions", self.admin_list_definitions)
        router.add_get(f"{base}/admin/provisioner/definitions/{{id}}", self.admin_get_definition)
        router.add_post(
            f"{base}/admin/provisioner/definitions/{{id}}/reset-resource", self.reset_resource
        )
        router.add_get(f"{base}/admin/provisioner/instances", self.list_instances)
        router.add_post(f"{base}/admin/provisioner/instances", self.create_instances)
        router.add_get(f"{base}/admin/provisioner/instances/{{id}}", self.get_instance)
        router.add_delete(f"{base}/admin/provisioner/instances/{{id}}", self.delete_instance)

    def _who(self, request: web.Request, permission: Permission, doing: str) -> Principal:
        who = self.principal_of(request)
        require(who, permission, doing)
        return who

    def _definitions(self) -> list[ProvisionerDefinitionConfig]:
        return [] if self.provisioning is None else list(self.provisioning.definitions.values())

    def _definition(self, definition_id: str) -> ProvisionerDefinitionConfig:
        found = self.provisioning.definitions.get(definition_id) if self.provisioning else None
        if found is None:
            raise NotFound(f"provisioner definition {definition_id} does not exist")
        return found

    def _instance(self, instance_id: str) -> InstanceRecord:
        found = self.provisioning.instances.get(instance_id) if self.provisioning else None
        if found is None:
            raise NotFound(f"provisioner instance {instance_id} does not exist")
        return found

    @documented(schema.LIST_DEFINITIONS)
    async def list_definitions(self, request: web.Request) -> web.Response:
        self._who(request, Permission.RUN_WORKFLOWS, "list provisioner definitions")
        page, token = _page(request, [definition_json(d) for d in self._definitions()])
        return web.json_response({"definitions": page, "pageToken": token})

    @documented(schema.GET_DEFINITION)
    async def get_definition(self, request: web.Request) -> web.Response:
        self._who(request, Permission.RUN_WORKFLOWS, "read provisioner definitions")
        return web.json_response(definition_json(self._definition(request.match_info["id"])))

    @documented(schema.ADMIN_LIST_DEFINITIONS)
    async def admin_list_definitions(self, request: web.Request) -> web.Response:
        self._who(request, Permission.PROVISION_NODES, "administer provisioner definitions")
        page, token = _page(request, [definition_json(d) for d in self._definitions()])
        return web.json_response({"definitions": page, "pageToken": token})

    @documented(schema.ADMIN_GET_DEFINITION)
    async def admin_get_definition(self, request: web.Request) -> web.Response:
        self._who(request, Permission.PROVISION_NODES, "administer provisioner definitions")
        return web.json_response(definition_json(self._definition(request.match_info["id"])))

    @documented(schema.RESET_RESOURCE)
    async def reset_resource(self, request: web.Request) -> web.Response:
        self._who(request, Permission.PROVISION_NODES, "administer provisioner definitions")
        definition = self._definition(request.match_info["id"])
        raise FailedPrecondition(
            f"provisioner definition {definition.id}: its resource is the shape configured in"
            " provisioner.definitions; nothing was learned from its nodes to reset"
        )

    @documented(schema.LIST_INSTANCES)
    async def list_instances(self, request: web.Request) -> web.Response:
        self._who(request, Permission.PROVISION_NODES, "list provisioner instances")
        records = self.provisioning.records() if self.provisioning else []
        page, token = _page(request, [instance_json(r) for r in records])
        return web.json_response({"instances": page, "pageToken": token})

    @documented(schema.GET_INSTANCE)
    async def get_instance(self, request: web.Request) -> web.Response:
        self._who(request, Permission.PROVISION_NODES, "read provisioner instances")
        return web.json_response(instance_json(self._instance(request.match_info["id"])))

    @documented(schema.CREATE_INSTANCES)
    async def create_instances(self, request: web.Request) -> web.Response:
        self._who(request, Permission.PROVISION_NODES, "create provisioner instances")
        body = parse_json_body(await request.read())
        if not isinstance(body, dict):
            raise InvalidArgument("request body: expected a JSON object")
        unknown = sorted(set(body) - _CREATE_FIELDS)
        if unknown:
            raise InvalidArgument(f"{', '.join(unknown)}: not a field of this request")
        definition_id = body.get("definitionId")
        if not isinstance(definition_id, str) or not definition_id:
            raise InvalidArgument("definitionId: required")
        self._definition(definition_id)
        count = _whole(body, "count", 1) or 1
        ttl = _whole(body, "ttl", None)
        annotations = _string_map(body, "annotations")
        directives = _string_map(body, "backendDirectives")
        assert self.provisioning is not None  # _definition found one
        records = await asyncio.to_thread(
            self.provisioning.create,
            definition_id,
            count,
            annotations=annotations,
            ttl=float(ttl) if ttl is not None else None,
            directives=directives,
        )
        return web.json_response({"ids": [r.id for r in records], "transactionId": ""})

    @documented(schema.DELETE_INSTANCE)
    async def delete_instance(self, request: web.Request) -> web.Response:
        self._who(request, Permission.PROVISION_NODES, "delete provisioner instances")
        record = self._instance(request.match_info["id"])
        if record.state is not InstanceState.DELETED:
            assert self.provisioning is not None
            await asyncio.to_thread(self.provisioning.delete, record.id)
        return web.json_response({"id": record.id})
