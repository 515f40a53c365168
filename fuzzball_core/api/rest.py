"""The REST gateway: Fuzzball's API v3 (basePath ``/v3``) over aiohttp.

Shaped like Fuzzball's own gateway (``fuzzball-api-v3.3.swagger.json``): JSON bodies in
camelCase, errors as google.rpc.Status bodies with the matching HTTP status, log streams as
newline-delimited ``{"result": {...}}`` objects the way grpc-gateway streams. Every request,
``/version`` included, needs ``Authorization: Bearer <token>``. Nothing a client sends can
produce a traceback: unexpected failures are logged here and answered with a bare INTERNAL.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from aiohttp import web

from fuzzball_core.api import rest_messages as msg
from fuzzball_core.api.following import POLL_INTERVAL, follow_logs, read_logs, resolve_stage_name
from fuzzball_core.errors import FuzzballError, Internal, InvalidArgument, NotFound, Unauthenticated
from fuzzball_core.orchestrate.object_cache_routes import (
    NODE_OBJECTS_PATH,
    add_object_cache_routes,
    check_node_token,
)
from fuzzball_core.scheduling import HoldEffect
from fuzzball_core.service.contract import OrchestrateService
from fuzzball_core.service.views import Principal

log = logging.getLogger(__name__)

BASE_PATH = "/v3"
#: Effects a hold can have: cordon, evict, deprovision.
HOLD_EFFECTS = tuple(effect.value for effect in HoldEffect)
_SERVICE = web.AppKey("service", object)
_POLL_INTERVAL = web.AppKey("poll_interval", float)
_OFFLOAD = web.AppKey("offload_calls", bool)
_PRINCIPAL = web.RequestKey("principal", Principal)
_WORKFLOW_ID = "{id:[^/:]+}"
_NODE_ID = "{id:[^/:]+}"

#: StartWorkflowRequest fields of the swagger this server accepts but does not act on.
_IGNORED_START_FIELDS = frozenset({"workflowId", "secretsMap", "clusterId", "applicationId"})

T = TypeVar("T")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def build_rest_app(
    service: OrchestrateService,
    *,
    poll_interval: float = POLL_INTERVAL,
    offload_calls: bool = False,
) -> web.Application:
    """The gateway as an aiohttp application; ``poll_interval`` paces followed logs.

    ``offload_calls`` runs the service's calls in worker threads, for a service that waits
    on other servers (Federate asks its members): a slow member then holds up only the
    requests that need it, not the event loop."""
    app = web.Application(middlewares=[_error_middleware, _auth_middleware])
    app[_SERVICE] = service
    app[_POLL_INTERVAL] = poll_interval
    app[_OFFLOAD] = offload_calls
    base = BASE_PATH
    app.router.add_get(f"{base}/version", _version)
    app.router.add_post(f"{base}/workflows", _start_workflow)
    app.router.add_get(f"{base}/workflows", _list_workflows)
    app.router.add_post(f"{base}/workflows:validate", _validate_workflow)
    app.router.add_get(f"{base}/workflows/{_WORKFLOW_ID}", _get_workflow)
    app.router.add_get(f"{base}/workflows/{_WORKFLOW_ID}:status", _workflow_status)
    app.router.add_get(f"{base}/workflows/{_WORKFLOW_ID}:log", _workflow_log)
    app.router.add_get(f"{base}/workflows/{_WORKFLOW_ID}:events", _workflow_events)
    app.router.add_patch(f"{base}/workflows/{_WORKFLOW_ID}:stop", _stop_workflow)
    app.router.add_get(f"{base}/workflows/{_WORKFLOW_ID}:why", _explain_workflow)
    app.router.add_get(f"{base}/nodes", _list_nodes)
    app.router.add_get(f"{base}/nodes/{_NODE_ID}", _get_node)
    app.router.add_delete(f"{base}/nodes/{_NODE_ID}", _remove_node)
    app.router.add_post(f"{base}/nodes/{_NODE_ID}:uncordon", _uncordon_node)
    app.router.add_get(f"{base}/nodes/{_NODE_ID}:events", _node_events)
    app.router.add_get(f"{base}/nodes/{_NODE_ID}/holds", _list_holds)
    app.router.add_post(f"{base}/nodes/{_NODE_ID}/holds", _add_hold)
    app.router.add_delete(f"{base}/nodes/{_NODE_ID}/holds/{{holdId}}", _release_hold)
    add_object_cache_routes(app, base, _service, _principal)
    return app


# ---------------------------------------------------------------------------------------------
# Middleware: errors and authentication


def status_response(error: FuzzballError) -> web.Response:
    """The google.rpc.Status reply for ``error`` with its HTTP status."""
    return web.json_response(error.to_status(), status=error.http_status)


class _MethodNotAllowed(FuzzballError):
    code = 12
    code_name = "UNIMPLEMENTED"
    http_status = 405


@web.middleware
async def _error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except FuzzballError as exc:
        return status_response(exc)
    except web.HTTPMethodNotAllowed:
        return status_response(
            _MethodNotAllowed(f"method {request.method} is not allowed on {request.path}")
        )
    except web.HTTPNotFound:
        return status_response(NotFound(f"no API path {request.path}"))
    except web.HTTPException as exc:
        return web.json_response({"code": 2, "message": exc.reason}, status=exc.status)
    except Exception:
        log.exception("REST %s %s failed", request.method, request.path)
        return status_response(Internal("internal error; the server log has the details"))


@web.middleware
async def _auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    # Unknown paths answer 404 before credentials are looked at, so that clients can probe
    # for the API's version prefix.
    if request.match_info.http_exception is None:
        if request.path.startswith(NODE_OBJECTS_PATH):
            check_node_token(_service(request), _bearer_token(request))
            return await handler(request)
        request[_PRINCIPAL] = _service(request).authenticate(_bearer_token(request))
    return await handler(request)


def _bearer_token(request: web.Request) -> str:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated(
            "missing credentials: send the header 'Authorization: Bearer <token>'"
        )
    return token.strip()


def _service(request: web.Request) -> OrchestrateService:
    return request.app[_SERVICE]  # type: ignore[return-value]


def _principal(request: web.Request) -> Principal:
    return request[_PRINCIPAL]


async def _run(request: web.Request, call: Callable[[OrchestrateService, Principal], T]) -> T:
    """``call(service, caller)``, in a worker thread when the app offloads calls."""
    service, who = _service(request), _principal(request)
    if request.app[_OFFLOAD]:
        return await asyncio.to_thread(call, service, who)
    return call(service, who)


# ---------------------------------------------------------------------------------------------
# Request parsing


async def _json_object(request: web.Request) -> dict[str, Any]:
    text = await request.text()
    if not text.strip():
        raise InvalidArgument("request body: expected a JSON object, got an empty body")
    try:
        body = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidArgument(
            f"request body: invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    if not isinstance(body, dict):
        raise InvalidArgument(f"request body: expected a JSON object, got {_json_type(body)}")
    return body


def _json_type(value: Any) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def _workflow_source(body: Mapping[str, Any], allowed: frozenset[str]) -> dict[str, Any]:
    """``raw_specification``/``definition`` keyword arguments from a start/validate body."""
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise InvalidArgument(f"request body: unknown field {unknown[0]!r}")
    raw, definition = body.get("rawSpecification"), body.get("definition")
    if raw is not None and definition is not None:
        raise InvalidArgument("request body: give either definition or rawSpecification, not both")
    if raw is None and definition is None:
        raise InvalidArgument("request body: definition or rawSpecification is required")
    if raw is not None and not isinstance(raw, str):
        raise InvalidArgument(f"rawSpecification: expected a string, got {_json_type(raw)}")
    if definition is not None and not isinstance(definition, dict):
        raise InvalidArgument(f"definition: expected an object, got {_json_type(definition)}")
    return {"raw_specification": raw, "definition": definition}


def _query_bool(request: web.Request, name: str) -> bool:
    value = request.query.get(name)
    if value is None or value.lower() in ("false", "0", ""):
        return False
    if value.lower() in ("true", "1"):
        return True
    raise InvalidArgument(f"{name}: expected true or false, got {value!r}")


def _query_int(request: web.Request, name: str) -> int | None:
    value = request.query.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise InvalidArgument(f"{name}: expected an integer, got {value!r}") from None


# ---------------------------------------------------------------------------------------------
# Handlers


async def _version(request: web.Request) -> web.Response:
    return web.json_response({"version": _service(request).version()})


async def _start_workflow(request: web.Request) -> web.Response:
    body = await _json_object(request)
    allowed = frozenset({"name", "rawSpecification", "definition"}) | _IGNORED_START_FIELDS
    source = _workflow_source(body, allowed)
    name = body.get("name")
    if name is not None and not isinstance(name, str):
        raise InvalidArgument(f"name: expected a string, got {_json_type(name)}")
    service, who = _service(request), _principal(request)
    # a service that can pin images off the event loop says so with an async variant
    start_async = getattr(service, "start_workflow_async", None)
    if start_async is not None:
        workflow_id = await start_async(who, name=name or None, **source)
    else:
        workflow_id = service.start_workflow(who, name=name or None, **source)
    return web.json_response({"id": workflow_id})


async def _validate_workflow(request: web.Request) -> web.Response:
    body = await _json_object(request)
    source = _workflow_source(body, frozenset({"rawSpecification", "definition"}))
    warnings = await _run(request, lambda s, who: s.validate_workflow(who, **source))
    return web.json_response({"warnings": warnings})


async def _list_workflows(request: web.Request) -> web.Response:
    workflows = await _run(request, lambda s, who: s.list_workflows(who))
    return web.json_response({"workflows": [msg.workflow_json(w) for w in workflows]})


async def _get_workflow(request: web.Request) -> web.Response:
    workflow_id = request.match_info["id"]
    workflow = await _run(request, lambda s, who: s.get_workflow(who, workflow_id))
    return web.json_response(msg.workflow_json(workflow))


async def _workflow_status(request: web.Request) -> web.Response:
    workflow_id = request.match_info["id"]
    workflow = await _run(request, lambda s, who: s.get_workflow(who, workflow_id))
    return web.json_response(msg.workflow_status_json(workflow))


async def _stop_workflow(request: web.Request) -> web.Response:
    workflow_id = request.match_info["id"]
    await _run(request, lambda s, who: s.stop_workflow(who, workflow_id))
    return web.json_response({"id": workflow_id})


async def _workflow_events(request: web.Request) -> web.Response:
    after_seq = _query_int(request, "afterSeq") or 0
    workflow_id = request.match_info["id"]
    events = await _run(
        request, lambda s, who: s.list_events(who, workflow_id, after_seq=after_seq)
    )
    return web.json_response({"events": [msg.event_json(e) for e in events]})


async def _node_events(request: web.Request) -> web.Response:
    after_seq = _query_int(request, "afterSeq") or 0
    node_id = request.match_info["id"]
    events = await _run(
        request, lambda s, who: s.list_node_events(who, node_id, after_seq=after_seq)
    )
    return web.json_response({"events": [msg.event_json(e) for e in events]})


async def _explain_workflow(request: web.Request) -> web.Response:
    workflow_id, everything = request.match_info["id"], _query_bool(request, "all")
    explanations = await _run(
        request, lambda s, who: s.explain_workflow(who, workflow_id, include_finished=everything)
    )
    return web.json_response({"stages": [msg.explanation_json(e) for e in explanations]})


async def _workflow_log(request: web.Request) -> web.StreamResponse:
    service, who, workflow_id = _service(request), _principal(request), request.match_info["id"]
    follow = _query_bool(request, "show.follow")
    tail = _query_int(request, "show.tail")
    task_id = _query_int(request, "taskId")
    # Everything that can fail on the request itself fails here, before the 200 is sent.
    stage_name = resolve_stage_name(service, who, workflow_id, request.query.get("name"))
    if not follow:
        chunks = read_logs(
            service, who, workflow_id, stage_name=stage_name, task_id=task_id, tail=tail
        )
        lines = "".join(json.dumps({"result": msg.log_result_json(c)}) + "\n" for c in chunks)
        return web.Response(text=lines, content_type="application/json")
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    await response.prepare(request)
    try:
        async for chunk in follow_logs(
            service,
            who,
            workflow_id,
            stage_name=stage_name,
            task_id=task_id,
            tail=tail,
            poll_interval=request.app[_POLL_INTERVAL],
        ):
            line = json.dumps({"result": msg.log_result_json(chunk)})
            await response.write(line.encode() + b"\n")
    except ConnectionResetError:
        return response  # the client went away; nobody is left to tell
    except FuzzballError as exc:
        await response.write(json.dumps({"error": exc.to_status()}).encode() + b"\n")
    except Exception:
        log.exception("following the log of workflow %s failed", workflow_id)
        error = Internal("internal error; the server log has the details")
        await response.write(json.dumps({"error": error.to_status()}).encode() + b"\n")
    await response.write_eof()
    return response


async def _list_nodes(request: web.Request) -> web.Response:
    nodes = await _run(request, lambda s, who: s.list_nodes(who))
    return web.json_response({"nodes": [msg.node_list_json(n) for n in nodes]})


async def _get_node(request: web.Request) -> web.Response:
    node_id = request.match_info["id"]
    node = await _run(request, lambda s, who: s.get_node(who, node_id))
    return web.json_response(msg.node_json(node))


async def _remove_node(request: web.Request) -> web.Response:
    node_id = request.match_info["id"]
    await _run(request, lambda s, who: s.remove_node(who, node_id))
    return web.json_response({})


async def _uncordon_node(request: web.Request) -> web.Response:
    """Release the node's admin cordon holds; the reply lists the holds left in place."""
    node_id = request.match_info["id"]
    released, remaining = await _run(
        request, lambda s, who: (s.uncordon(who, node_id), s.list_holds(who, node_id))
    )
    return web.json_response({"released": released, "holds": [msg.hold_json(h) for h in remaining]})


async def _list_holds(request: web.Request) -> web.Response:
    node_id = request.match_info["id"]
    holds = await _run(request, lambda s, who: s.list_holds(who, node_id))
    return web.json_response({"holds": [msg.hold_json(h) for h in holds]})


async def _add_hold(request: web.Request) -> web.Response:
    body = await _json_object(request)
    unknown = sorted(set(body) - {"effect", "reason"})
    if unknown:
        raise InvalidArgument(f"request body: unknown field {unknown[0]!r}")
    effect, reason = body.get("effect"), body.get("reason", "")
    if effect is None:
        raise InvalidArgument(f"effect: required, one of {', '.join(HOLD_EFFECTS)}")
    if not isinstance(effect, str):
        raise InvalidArgument(f"effect: expected a string, got {_json_type(effect)}")
    if effect not in HOLD_EFFECTS:
        raise InvalidArgument(f"effect: expected one of {', '.join(HOLD_EFFECTS)}, got {effect!r}")
    if not isinstance(reason, str):
        raise InvalidArgument(f"reason: expected a string, got {_json_type(reason)}")
    node_id = request.match_info["id"]
    hold = await _run(request, lambda s, who: s.add_hold(who, node_id, effect, reason))
    return web.json_response(msg.hold_json(hold))


async def _release_hold(request: web.Request) -> web.Response:
    text = request.match_info["holdId"]
    try:
        hold_id = int(text)
    except ValueError:
        raise InvalidArgument(f"holdId: expected an integer, got {text!r}") from None
    node_id = request.match_info["id"]
    await _run(request, lambda s, who: s.release_hold(who, node_id, hold_id))
    return web.json_response({})
