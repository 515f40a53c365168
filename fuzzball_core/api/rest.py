"""The REST gateway: Fuzzball's API v3 (basePath ``/v3``) over aiohttp.

Shaped like Fuzzball's own gateway (``fuzzball-api-v3.3.swagger.json``): JSON bodies in
camelCase, errors as google.rpc.Status bodies with the matching HTTP status, log streams as
newline-delimited ``{"result": {...}}`` objects the way grpc-gateway streams. Every body, both
ways, is a ``fuzzball.v1`` message in its proto3 JSON mapping (``rest_messages``): replies are
the messages the gRPC API sends, request bodies are parsed into the messages it receives.
Every request, ``/version`` included, needs ``Authorization: Bearer <token>``. Nothing a client
sends can produce a traceback: unexpected failures are logged here and answered with a bare
INTERNAL.

A process may add routes of its own (:class:`ExtraRoutes`): Orchestrate adds its object
cache, which nodes reach with their own token.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from aiohttp import web
from google.protobuf.message import Message

from fuzzball_core.api import proto_messages as msg
from fuzzball_core.api.following import POLL_INTERVAL, follow_logs, read_logs, resolve_stage_name
from fuzzball_core.api.requests import hold_effect, workflow_source
from fuzzball_core.api.rest_messages import parse_request, to_json
from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.errors import FuzzballError, Internal, InvalidArgument, NotFound, Unauthenticated
from fuzzball_core.service.contract import OrchestrateService
from fuzzball_core.service.views import Principal

log = logging.getLogger(__name__)

BASE_PATH = "/v3"
_SERVICE = web.AppKey("service", object)
_POLL_INTERVAL = web.AppKey("poll_interval", float)
_OFFLOAD = web.AppKey("offload_calls", bool)
_NODE_PATHS = web.AppKey("node_paths", dict)
_PUBLIC_PATHS = web.AppKey("public_paths", frozenset)
_PRINCIPAL = web.RequestKey("principal", Principal)
_WORKFLOW_ID = "{id:[^/:]+}"
_NODE_ID = "{id:[^/:]+}"

#: StartWorkflowRequest fields of the swagger this server accepts but does not act on.
_IGNORED_START_FIELDS = frozenset({"workflowId", "secretsMap", "clusterId", "applicationId"})

T = TypeVar("T")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class ExtraRoutes:
    """Routes a process adds to the gateway beside the API's own.

    ``add(app, base, principal_of)`` registers them under ``base`` (``/v3``); a handler finds
    its authenticated caller with ``principal_of(request)``. Requests whose path starts with
    one of ``node_paths`` are not an account's: ``check_node_token(token)`` accepts or refuses
    their bearer token instead (raising ``Unauthenticated``). ``public_paths`` need no token
    at all (the process's ``/healthz`` and ``/readyz``).
    """

    add: Callable[[web.Application, str, Callable[[web.Request], Principal]], None]
    node_paths: tuple[str, ...] = ()
    check_node_token: Callable[[str], None] | None = None
    public_paths: tuple[str, ...] = ()


def build_rest_app(
    service: OrchestrateService,
    *,
    poll_interval: float = POLL_INTERVAL,
    offload_calls: bool = False,
    extra_routes: Sequence[ExtraRoutes] = (),
) -> web.Application:
    """The gateway as an aiohttp application; ``poll_interval`` paces followed logs.

    ``offload_calls`` runs the service's calls in worker threads, for a service that waits
    on other servers (Federate asks its members): a slow member then holds up only the
    requests that need it, not the event loop. ``extra_routes`` are the process's own."""
    app = web.Application(middlewares=[_error_middleware, _auth_middleware])
    app[_SERVICE] = service
    app[_POLL_INTERVAL] = poll_interval
    app[_OFFLOAD] = offload_calls
    app[_NODE_PATHS] = {
        prefix: extra.check_node_token
        for extra in extra_routes
        if extra.check_node_token is not None
        for prefix in extra.node_paths
    }
    app[_PUBLIC_PATHS] = frozenset(path for extra in extra_routes for path in extra.public_paths)
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
    for extra in extra_routes:
        extra.add(app, base, _principal)
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
    if request.path in request.app[_PUBLIC_PATHS]:
        return await handler(request)
    if request.match_info.http_exception is None:
        node_check = _node_token_check(request)
        if node_check is not None:
            node_check(_bearer_token(request))
            return await handler(request)
        request[_PRINCIPAL] = _service(request).authenticate(_bearer_token(request))
    return await handler(request)


def _node_token_check(request: web.Request) -> Callable[[str], None] | None:
    """The node-token check of the extra routes ``request`` is for, if it is for one."""
    checks: dict[str, Callable[[str], None]] = request.app[_NODE_PATHS]
    for prefix, check in checks.items():
        if request.path.startswith(prefix):
            return check
    return None


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


async def _json_body(request: web.Request) -> Any:
    """The request's JSON body, read but not yet checked against a message."""
    text = await request.text()
    if not text.strip():
        raise InvalidArgument("request body: expected a JSON object, got an empty body")
    try:
        body = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidArgument(
            f"request body: invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    return body


def _reply(message: Message) -> web.Response:
    return web.json_response(to_json(message))


_NO_SOURCE = "request body: definition or rawSpecification is required"


def _source(
    request: pb.StartWorkflowRequest | pb.ValidateWorkflowRequest, sent: dict[str, Any]
) -> dict[str, Any]:
    """The workflow a start or validate body carries, a definition as it was sent.

    A ``Struct`` is a map and keeps no key order, so the definition is passed on from the
    body itself (checked by the parse): its jobs, and the stored specification written from
    it, keep the order their author gave them.
    """
    source = workflow_source(request, missing=_NO_SOURCE)
    if source["definition"] is not None:
        source["definition"] = sent["definition"]
    return source


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
    return _reply(pb.GetVersionResponse(version=_service(request).version()))


async def _start_workflow(request: web.Request) -> web.Response:
    sent = await _json_body(request)
    body = parse_request(sent, pb.StartWorkflowRequest, ignored=_IGNORED_START_FIELDS)
    source = _source(body, sent)
    started = await _service(request).start_workflow_async(
        _principal(request), name=body.name or None, **source
    )
    return _reply(msg.started_message(started))


async def _validate_workflow(request: web.Request) -> web.Response:
    sent = await _json_body(request)
    source = _source(parse_request(sent, pb.ValidateWorkflowRequest), sent)
    warnings = await _run(request, lambda s, who: s.validate_workflow(who, **source))
    return _reply(pb.ValidateWorkflowResponse(warnings=warnings))


async def _list_workflows(request: web.Request) -> web.Response:
    workflows = await _run(request, lambda s, who: s.list_workflows(who))
    return _reply(pb.ListWorkflowsResponse(workflows=[msg.workflow_message(w) for w in workflows]))


async def _get_workflow(request: web.Request) -> web.Response:
    workflow_id = request.match_info["id"]
    workflow = await _run(request, lambda s, who: s.get_workflow(who, workflow_id))
    return _reply(msg.workflow_message(workflow))


async def _workflow_status(request: web.Request) -> web.Response:
    workflow_id = request.match_info["id"]
    workflow = await _run(request, lambda s, who: s.get_workflow(who, workflow_id))
    return _reply(msg.workflow_status_message(workflow))


async def _stop_workflow(request: web.Request) -> web.Response:
    workflow_id = request.match_info["id"]
    await _run(request, lambda s, who: s.stop_workflow(who, workflow_id))
    return _reply(pb.WorkflowIdResponse(id=workflow_id))


async def _workflow_events(request: web.Request) -> web.Response:
    after_seq = _query_int(request, "afterSeq") or 0
    workflow_id = request.match_info["id"]
    events = await _run(
        request, lambda s, who: s.list_events(who, workflow_id, after_seq=after_seq)
    )
    return _reply(pb.ListEventsResponse(events=[msg.event_message(e) for e in events]))


async def _node_events(request: web.Request) -> web.Response:
    after_seq = _query_int(request, "afterSeq") or 0
    node_id = request.match_info["id"]
    events = await _run(
        request, lambda s, who: s.list_node_events(who, node_id, after_seq=after_seq)
    )
    return _reply(pb.ListEventsResponse(events=[msg.event_message(e) for e in events]))


async def _explain_workflow(request: web.Request) -> web.Response:
    workflow_id, everything = request.match_info["id"], _query_bool(request, "all")
    explanations = await _run(
        request, lambda s, who: s.explain_workflow(who, workflow_id, include_finished=everything)
    )
    return _reply(
        pb.ExplainWorkflowResponse(stages=[msg.explanation_message(e) for e in explanations])
    )


def _log_line(key: str, body: dict[str, Any]) -> bytes:
    """One line of a log stream: ``{"result": chunk}`` or ``{"error": status}``."""
    return json.dumps({key: body}).encode() + b"\n"


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
        lines = b"".join(_log_line("result", to_json(msg.log_chunk_message(c))) for c in chunks)
        return web.Response(body=lines, content_type="application/json")
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
            await response.write(_log_line("result", to_json(msg.log_chunk_message(chunk))))
    except ConnectionResetError:
        return response  # the client went away; nobody is left to tell
    except FuzzballError as exc:
        await response.write(_log_line("error", exc.to_status()))
    except Exception:
        log.exception("following the log of workflow %s failed", workflow_id)
        error = Internal("internal error; the server log has the details")
        await response.write(_log_line("error", error.to_status()))
    await response.write_eof()
    return response


async def _list_nodes(request: web.Request) -> web.Response:
    nodes = await _run(request, lambda s, who: s.list_nodes(who))
    return _reply(pb.ListNodesResponse(nodes=[msg.node_list_message(n) for n in nodes]))


async def _get_node(request: web.Request) -> web.Response:
    node_id = request.match_info["id"]
    node = await _run(request, lambda s, who: s.get_node(who, node_id))
    return _reply(msg.node_message(node))


async def _remove_node(request: web.Request) -> web.Response:
    node_id = request.match_info["id"]
    await _run(request, lambda s, who: s.remove_node(who, node_id))
    return _reply(pb.RemoveNodeResponse())


async def _uncordon_node(request: web.Request) -> web.Response:
    """Release the node's admin cordon holds; the reply lists the holds left in place."""
    node_id = request.match_info["id"]
    released, remaining = await _run(
        request, lambda s, who: (s.uncordon(who, node_id), s.list_holds(who, node_id))
    )
    return _reply(
        pb.UncordonNodeResponse(released=released, holds=[msg.hold_message(h) for h in remaining])
    )


async def _list_holds(request: web.Request) -> web.Response:
    node_id = request.match_info["id"]
    holds = await _run(request, lambda s, who: s.list_holds(who, node_id))
    return _reply(pb.ListNodeHoldsResponse(holds=[msg.hold_message(h) for h in holds]))


async def _add_hold(request: web.Request) -> web.Response:
    body = parse_request(await _json_body(request), pb.AddNodeHoldRequest, from_path=("node_id",))
    effect, node_id = hold_effect(body.effect), request.match_info["id"]
    hold = await _run(request, lambda s, who: s.add_hold(who, node_id, effect, body.reason))
    return _reply(msg.hold_message(hold))


async def _release_hold(request: web.Request) -> web.Response:
    text = request.match_info["holdId"]
    try:
        hold_id = int(text)
    except ValueError:
        raise InvalidArgument(f"holdId: expected an integer, got {text!r}") from None
    node_id = request.match_info["id"]
    await _run(request, lambda s, who: s.release_hold(who, node_id, hold_id))
    return _reply(pb.ReleaseNodeHoldResponse())
