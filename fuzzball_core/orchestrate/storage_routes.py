"""Storage over REST, as the v3.3 swagger defines it:

* ``/v3/admin/drivers`` (GET list, POST InstallDriver) and ``/v3/admin/drivers/{id}`` (GET,
  PUT, DELETE): storage drivers, cluster administrators only;
* ``/v3/admin/storage-classes`` (GET, POST) and ``/{id}`` (GET, PUT, DELETE), ``{id}:describe``,
  ``{id}:enable``, ``{id}:disable``: storage classes, cluster administrators only;
* ``/v3/storage-classes`` and ``/{id}``: the classes any member may use;
* ``/v3/volumes`` (GET, POST CreateVolume) and ``/{id}`` (GET, PUT or PATCH UpdateVolume,
  DELETE), ``{id}:set-status``: the caller's volumes. Another user's or organization's volume
  answers 404 exactly as an absent one.

Bodies and answers are the swagger's (InstallDriverRequest, DriverInfoResponse,
CreateStorageClassRequest, StorageClassInfoResponse, CreateVolumeRequest, VolumeInfoResponse,
...). Lists page with ``pageSize`` and ``pageToken`` (``pageToken`` in the answer: the
next page's, "" on the last; 1,000 a page unless asked for fewer); any other query parameter
(``filter``, ``orderBy``) is refused naming it. Answers that accept a definition add
``warnings``: the fields accepted that have no effect here. A VolumeInfoResponse adds
``storageClass``, ``scope``, ``node`` (the node holding a node-local volume) and
``sizeBytes``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from sqlalchemy import select

from fuzzball_core.api.json_body import parse_json_body
from fuzzball_core.api.list_pages import MAX_PAGE, paged, refuse_unknown
from fuzzball_core.api.openapi import JsonOperation, documented
from fuzzball_core.api.rest import ExtraRoutes
from fuzzball_core.errors import InvalidArgument
from fuzzball_core.orchestrate import storage_catalog as catalog
from fuzzball_core.orchestrate import storage_schemas as schema
from fuzzball_core.orchestrate import volume_removal, volumes
from fuzzball_core.orchestrate.engine import Engine
from fuzzball_core.orchestrate.volumes import VolumeOwner
from fuzzball_core.orchestrate.workflow_volumes import installed_driver
from fuzzball_core.service.permissions import require
from fuzzball_core.service.views import Principal
from fuzzball_core.spec.names import check_printable
from fuzzball_core.store.models import StorageClass, StorageDriverRow, Volume
from fuzzball_core.vocabulary import Permission

#: a path parameter that stops before ``:verb``
_ID = "{id:[^/:]+}"
#: the one order of each list (said when a parameter asking another is refused)
_CLASS_ORDER = "storage classes are listed by name"
_VOLUME_ORDER = "volumes are listed oldest first"


def storage_routes(engine: Engine) -> ExtraRoutes:
    """The storage routes over ``engine``'s store, for the REST gateway."""
    return ExtraRoutes(
        add=lambda app, base, principal_of: add_storage_routes(app, base, engine, principal_of)
    )


def _time(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def driver_json(row: StorageDriverRow) -> dict[str, Any]:
    """A DriverInfoResponse."""
    return {
        "id": row.id,
        "createTime": _time(row.created_at),
        "updateTime": _time(row.updated_at),
        "driver": row.definition,
    }


def class_json(row: StorageClass) -> dict[str, Any]:
    """A StorageClassInfoResponse."""
    return {
        "id": row.id,
        "driverId": row.driver_id,
        "name": row.name,
        "createTime": _time(row.created_at),
        "updateTime": _time(row.updated_at),
        "class": row.definition,
        "scope": str(row.definition.get("scope") or "SCOPE_UNSPECIFIED"),
        "status": row.status,
        "restricted": catalog.is_restricted(row),
        "persistent": row.persistent,
        "retain": row.retain_on_delete,
    }


def volume_json(row: Volume, storage_class: StorageClass | None) -> dict[str, Any]:
    """A VolumeInfoResponse (with the class, scope, holding node and size)."""
    class_name = storage_class.name if storage_class is not None else ""
    return {
        "id": row.id,
        "reference": f"{volumes.SCHEME}{row.scope}/{class_name}/{row.name}",
        "name": row.name,
        "displayName": row.display_name,
        "description": row.description,
        "createTime": _time(row.created_at),
        "accessTime": _time(row.access_time),
        "status": row.status,
        "storageClass": class_name,
        "scope": row.scope,
        "node": row.node_id or "",
        "sizeBytes": str(row.size_bytes),
    }


def _body(data: Any, key: str, *, cluster_id: bool = False) -> Any:
    """``data[key]`` of a request body that must be an object with only ``key`` (and, with
    ``cluster_id``, a volume request's ``clusterId``, which the swagger defines there only)."""
    if not isinstance(data, dict):
        raise InvalidArgument("the body must be a JSON object")
    known = {key, "clusterId"} if cluster_id else {key}
    extra = sorted(set(data) - known)
    if extra:
        raise InvalidArgument(f"{extra[0]}: unknown field (known: {', '.join(sorted(known))})")
    if "clusterId" in data and not isinstance(data["clusterId"], str):
        raise InvalidArgument("clusterId: must be a string")
    return data.get(key)


def _text(document: dict[str, Any], key: str, where: str) -> str | None:
    value = document.get(key)
    if value is not None and not isinstance(value, str):
        raise InvalidArgument(f"{where}.{key}: must be a string")
    return value


#: a volume request's fields accepted that have no effect here, and why
_VOLUME_FIELDS_WITHOUT_EFFECT = {
    "clusterId": "has no effect here: this server is one cluster",
    "volume.version": "has no effect here: volumes have one version",
}


def _empty_body(data: bytes) -> None:
    """Refuse a body that is neither absent nor an empty JSON object (the swagger's
    Enable/DisableStorageClass bodies define no field)."""
    if not data:
        return
    body = parse_json_body(data)
    if not isinstance(body, dict):
        raise InvalidArgument("the body must be a JSON object")
    if body:
        raise InvalidArgument(f"{sorted(body)[0]}: unknown field (the body defines none)")


def _volume_request(data: Any) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The ``volume`` of a CreateVolumeRequest or UpdateVolumeRequest body, checked, and the
    warnings for the fields given that have no effect here (``clusterId``,
    ``volume.version``). Display names and descriptions are bounded and printable."""
    value = _body(data, "volume", cluster_id=True)
    if not isinstance(value, dict):
        raise InvalidArgument("volume: required, an object")
    known = {"version", "name", "displayName", "description", "storageClassName", "scope"}
    extra = sorted(set(value) - known)
    if extra:
        raise InvalidArgument(
            f"volume.{extra[0]}: unknown field (known: {', '.join(sorted(known))})"
        )
    for key in known:
        _text(value, key, "volume")
    for key, limit in (
        ("displayName", volumes.MAX_DISPLAY_NAME),
        ("description", volumes.MAX_DESCRIPTION),
    ):
        if value.get(key):
            check_printable(f"volume.{key}", value[key], limit=limit)
    given = {"clusterId": data.get("clusterId"), "volume.version": value.get("version")}
    warnings = tuple(
        f"{field}: {effect}"
        for field, effect in _VOLUME_FIELDS_WITHOUT_EFFECT.items()
        if given[field]
    )
    return value, warnings


def add_storage_routes(
    app: web.Application,
    base: str,
    engine: Engine,
    principal_of: Callable[[web.Request], Principal],
) -> None:
    """Add the storage routes under ``base`` (``/v3``)."""

    def admin(request: web.Request, doing: str) -> Principal:
        who = principal_of(request)
        require(who, Permission.ADMINISTER_CLUSTER, doing)
        return who

    def member(request: web.Request, doing: str) -> VolumeOwner:
        who = principal_of(request)
        require(who, Permission.RUN_WORKFLOWS, doing)
        return VolumeOwner.of(who)

    def with_warnings(answer: dict[str, Any], warnings: tuple[str, ...]) -> web.Response:
        return web.json_response({**answer, **({"warnings": list(warnings)} if warnings else {})})

    def listing(request: web.Request, key: str, items: Sequence[Any], order: str) -> web.Response:
        """One page of ``items`` (already in their one ``order``) as ``{key: [...],
        "pageToken"}``; query parameters other than pageSize and pageToken are refused."""
        refuse_unknown(request.query, why=f"not supported; {order}")
        page, token = paged(request.query, items, default=MAX_PAGE)
        return web.json_response({key: list(page), "pageToken": token})

    # -- drivers -------------------------------------------------------------------------------

    @documented(schema.LIST_DRIVERS)
    async def list_drivers(request: web.Request) -> web.Response:
        admin(request, "list storage drivers")

        def read(tx: Any) -> list[dict[str, Any]]:
            catalog.ensure_defaults(tx.session, tx.now)
            rows = tx.session.scalars(select(StorageDriverRow).order_by(StorageDriverRow.name))
            return [driver_json(row) for row in rows]

        return listing(request, "drivers", engine.change(read), "drivers are listed by name")

    @documented(schema.INSTALL_DRIVER)
    async def install_driver(request: web.Request) -> web.Response:
        admin(request, "install storage drivers")
        document = _body(parse_json_body(await request.read()), "driver")
        accepted = catalog.check_driver(document, installed_driver)

        def add(tx: Any) -> str:
            catalog.ensure_defaults(tx.session, tx.now)
            return catalog.install_driver(tx.session, accepted, tx.now).id

        return with_warnings({"id": engine.change(add)}, accepted.warnings)

    @documented(schema.GET_DRIVER)
    async def get_driver(request: web.Request) -> web.Response:
        admin(request, "read storage drivers")
        with engine.sessions() as session:
            return web.json_response(
                driver_json(catalog.find_driver(session, request.match_info["id"]))
            )

    @documented(schema.UPDATE_DRIVER)
    async def update_driver(request: web.Request) -> web.Response:
        admin(request, "change storage drivers")
        document = _body(parse_json_body(await request.read()), "driver")
        accepted = catalog.check_driver(document, installed_driver)

        def change(tx: Any) -> dict[str, Any]:
            row = catalog.find_driver(tx.session, request.match_info["id"])
            if accepted.definition["name"] != row.name:
                raise InvalidArgument("driver.name: a driver keeps its name (install another)")
            row.definition = accepted.definition
            row.updated_at = tx.now
            return {"id": row.id}

        return with_warnings(engine.change(change), accepted.warnings)

    @documented(schema.UNINSTALL_DRIVER)
    async def uninstall_driver(request: web.Request) -> web.Response:
        admin(request, "uninstall storage drivers")
        uninstalled = engine.change(
            lambda tx: catalog.uninstall_driver(tx.session, request.match_info["id"])
        )
        return web.json_response({"id": uninstalled})

    # -- classes -------------------------------------------------------------------------------

    def classes(tx: Any) -> list[dict[str, Any]]:
        catalog.ensure_defaults(tx.session, tx.now)
        rows = tx.session.scalars(select(StorageClass).order_by(StorageClass.name))
        return [class_json(row) for row in rows]

    @documented(schema.ADMIN_LIST_CLASSES)
    async def admin_list_classes(request: web.Request) -> web.Response:
        admin(request, "list storage classes")
        return listing(request, "classes", engine.change(classes), _CLASS_ORDER)

    @documented(schema.CREATE_CLASS)
    async def create_class(request: web.Request) -> web.Response:
        admin(request, "create storage classes")
        document = _body(parse_json_body(await request.read()), "class")

        def add(tx: Any) -> tuple[str, tuple[str, ...]]:
            catalog.ensure_defaults(tx.session, tx.now)
            row, warnings = catalog.create_class(tx.session, document, installed_driver, tx.now)
            return row.id, warnings

        created, warnings = engine.change(add)
        return with_warnings({"id": created}, warnings)

    @documented(schema.ADMIN_GET_CLASS)
    async def admin_get_class(request: web.Request) -> web.Response:
        admin(request, "read storage classes")
        with engine.sessions() as session:
            row = catalog.find_class(session, request.match_info["id"])
            return web.json_response(class_json(row))

    @documented(schema.DESCRIBE_CLASS)
    async def describe_class(request: web.Request) -> web.Response:
        admin(request, "describe storage classes")
        with engine.sessions() as session:
            row = catalog.find_class(session, request.match_info["id"])
            return web.json_response({"class": class_json(row), "pendingExecution": False})

    @documented(schema.UPDATE_CLASS)
    async def update_class(request: web.Request) -> web.Response:
        admin(request, "change storage classes")
        document = _body(parse_json_body(await request.read()), "class")

        def change(tx: Any) -> tuple[str, tuple[str, ...]]:
            row, warnings = catalog.update_class(
                tx.session, request.match_info["id"], document, installed_driver, tx.now
            )
            return row.id, warnings

        changed, warnings = engine.change(change)
        return with_warnings({"id": changed}, warnings)

    @documented(schema.DELETE_CLASS)
    async def delete_class(request: web.Request) -> web.Response:
        admin(request, "delete storage classes")
        deleted = engine.change(
            lambda tx: catalog.delete_class(tx.session, request.match_info["id"])
        )
        return web.json_response({"id": deleted})

    def set_class(
        status: str, doing: str, operation: JsonOperation
    ) -> Callable[[web.Request], Any]:
        @documented(operation)
        async def handler(request: web.Request) -> web.Response:
            admin(request, doing)
            _empty_body(await request.read())
            row_id = engine.change(
                lambda tx: (
                    catalog.set_class_status(
                        tx.session, request.match_info["id"], status, tx.now
                    ).id
                )
            )
            return web.json_response({"id": row_id})

        return handler

    @documented(schema.LIST_CLASSES)
    async def list_classes(request: web.Request) -> web.Response:
        member(request, "list storage classes")
        return listing(request, "classes", engine.change(classes), _CLASS_ORDER)

    @documented(schema.GET_CLASS)
    async def get_class(request: web.Request) -> web.Response:
        member(request, "read storage classes")
        with engine.sessions() as session:
            return web.json_response(
                class_json(catalog.find_class(session, request.match_info["id"]))
            )

    # -- volumes -------------------------------------------------------------------------------

    def answer_volume(session: Any, row: Volume) -> dict[str, Any]:
        return volume_json(row, session.get(StorageClass, row.class_id))

    @documented(schema.LIST_VOLUMES)
    async def list_volumes(request: web.Request) -> web.Response:
        owner = member(request, "list volumes")
        refuse_unknown(request.query, why=f"not supported; {_VOLUME_ORDER}")
        with engine.sessions() as session:
            rows, token = paged(request.query, volumes.listed(session, owner), default=MAX_PAGE)
            listed = [answer_volume(session, r) for r in rows]
        return web.json_response({"volumes": listed, "pageToken": token})

    @documented(schema.CREATE_VOLUME)
    async def create_volume(request: web.Request) -> web.Response:
        owner = member(request, "create volumes")
        definition, warnings = _volume_request(parse_json_body(await request.read()))
        if not definition.get("name"):
            raise InvalidArgument("volume.name: required")

        def add(tx: Any) -> str:
            return volumes.create(
                tx.session,
                owner,
                name=definition["name"],
                storage_class=definition.get("storageClassName") or catalog.PERSISTENT_CLASS,
                scope=definition.get("scope") or "user",
                display_name=definition.get("displayName") or "",
                description=definition.get("description") or "",
                now=tx.now,
            ).id

        return with_warnings({"id": engine.change(add)}, warnings)

    @documented(schema.GET_VOLUME)
    async def get_volume(request: web.Request) -> web.Response:
        owner = member(request, "read volumes")
        with engine.sessions() as session:
            row = volumes.find(session, owner, request.match_info["id"])
            return web.json_response(answer_volume(session, row))

    @documented(schema.UPDATE_VOLUME)
    async def update_volume(request: web.Request) -> web.Response:
        owner = member(request, "change volumes")
        definition, warnings = _volume_request(parse_json_body(await request.read()))
        if definition.get("storageClassName") or definition.get("scope"):
            raise InvalidArgument("volume.storageClassName: a volume keeps its class and scope")

        def change(tx: Any) -> dict[str, Any]:
            row = volumes.update(
                tx.session,
                owner,
                request.match_info["id"],
                name=definition.get("name"),
                display_name=definition.get("displayName"),
                description=definition.get("description"),
                now=tx.now,
            )
            return answer_volume(tx.session, row)

        return with_warnings(engine.change(change), warnings)

    @documented(schema.DELETE_VOLUME)
    async def delete_volume(request: web.Request) -> web.Response:
        owner = member(request, "delete volumes")
        volume_id = request.match_info["id"]
        answer = engine.change(
            lambda tx: volume_removal.delete(engine.context, tx, owner, volume_id)
        )
        return web.json_response({"id": volume_id, **answer})

    @documented(schema.SET_VOLUME_STATUS)
    async def set_volume_status(request: web.Request) -> web.Response:
        owner = member(request, "change volumes")
        status = _body(parse_json_body(await request.read()), "status")
        if not isinstance(status, str):
            raise InvalidArgument("status: required, one of " + ", ".join(volumes.STATUSES))

        def change(tx: Any) -> dict[str, Any]:
            row = volumes.set_status(tx.session, owner, request.match_info["id"], status, tx.now)
            return {"id": row.id, "status": row.status}

        return web.json_response(engine.change(change))

    router = app.router
    router.add_get(f"{base}/admin/drivers", list_drivers)
    router.add_post(f"{base}/admin/drivers", install_driver)
    router.add_get(f"{base}/admin/drivers/{_ID}", get_driver)
    router.add_put(f"{base}/admin/drivers/{_ID}", update_driver)
    router.add_delete(f"{base}/admin/drivers/{_ID}", uninstall_driver)
    router.add_get(f"{base}/admin/storage-classes", admin_list_classes)
    router.add_post(f"{base}/admin/storage-classes", create_class)
    router.add_get(f"{base}/admin/storage-classes/{_ID}", admin_get_class)
    router.add_put(f"{base}/admin/storage-classes/{_ID}", update_class)
    router.add_delete(f"{base}/admin/storage-classes/{_ID}", delete_class)
    router.add_get(f"{base}/admin/storage-classes/{_ID}:describe", describe_class)
    router.add_patch(
        f"{base}/admin/storage-classes/{_ID}:enable",
        set_class(catalog.READY, "enable classes", schema.ENABLE_CLASS),
    )
    router.add_patch(
        f"{base}/admin/storage-classes/{_ID}:disable",
        set_class(catalog.DISABLED, "disable classes", schema.DISABLE_CLASS),
    )
    router.add_get(f"{base}/storage-classes", list_classes)
    router.add_get(f"{base}/storage-classes/{_ID}", get_class)
    router.add_get(f"{base}/volumes", list_volumes)
    router.add_post(f"{base}/volumes", create_volume)
    router.add_get(f"{base}/volumes/{_ID}", get_volume)
    router.add_put(f"{base}/volumes/{_ID}", update_volume)
    router.add_patch(f"{base}/volumes/{_ID}", update_volume)
    router.add_delete(f"{base}/volumes/{_ID}", delete_volume)
    router.add_patch(f"{base}/volumes/{_ID}:set-status", set_volume_status)
