"""The REST gateway: Fuzzball's API v3 (basePath ``/v3``) over aiohttp.

Shaped like Fuzzball's own gateway (``fuzzball-api-v3.3.swagger.json``): JSON bodies in
camelCase, errors as google.rpc.Status bodies with the matching HTTP status, log streams as
newline-delimited ``{"result": {...}}`` objects the way grpc-gateway streams. Every body, both
ways, is a ``fuzzball.v1`` message in its proto3 JSON mapping (``rest_messages``): replies are
the messages the gRPC API sends, request bodies are parsed into the messages it receives.
Every request but ``/version`` (``/v3/version`` and ``/version``, which clients probe before
they log in) needs ``Authorization: Bearer <token>``. Every response carries
``X-Content-Type-Options: nosniff``, ``Referrer-Policy: no-referrer`` and
``X-Frame-Options: DENY``, and over HTTPS ``Strict-Transport-Security``. Nothing a client
sends can produce a traceback: unexpected failures are logged here and answered with a bare
INTERNAL.

A process may add routes of its own (:class:`ExtraRoutes`): Orchestrate adds its object
cache, which nodes reach with their own token.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from aiohttp import web
from google.protobuf.message import Message
from multidict import MultiMapping

from fuzzball_core import FUZZBALL_API_RELEASE

# declares the process's /healthz and /readyz, which every gateway serving them lists
from fuzzball_core.api import health_schemas  # noqa: F401
from fuzzball_core.api import proto_messages as msg
from fuzzball_core.api.following import (
    NEXT_PAGE_TOKEN,
    POLL_INTERVAL,
    LogQuery,
    follow_logs,
    page_size,
    page_token_seq,
    read_all,
    read_page,
    resolve_stage_name,
)
from fuzzball_core.api.gateway_thread import (
    HOME_LOOP,
    HomeLoop,
    any_thread,
    home_loop_middleware,
)
from fuzzball_core.api.http_errors import (
    HANDLER_LIMITS,
    MAX_BODY_BYTES,
    status_of_http_exception,
)
from fuzzball_core.api.json_body import parse_json_body
from fuzzball_core.api.list_pages import MAX_PAGE, PAGE_PARAMETERS, keyed_page, refuse_unknown
from fuzzball_core.api.node_listing import NodeListBody
from fuzzball_core.api.openapi import Operation, Query, documented, openapi_document
from fuzzball_core.api.requests import (
    START_FIELDS_CHECKED_APART,
    hold_effect,
    hold_reason,
    start_request_fields,
    workflow_name,
    workflow_source,
)
from fuzzball_core.api.rest_messages import parse_request, to_json
from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.errors import FuzzballError, Internal, InvalidArgument, Unauthenticated
from fuzzball_core.service.contract import OrchestrateService
from fuzzball_core.service.forwarded_identity import HEADER as FORWARDED_IDENTITY
from fuzzball_core.service.oidc import looks_like_jwt
from fuzzball_core.service.views import LogChunkView, Principal, WorkflowView
from fuzzball_core.store.database import unreachable_error

log = logging.getLogger(__name__)

BASE_PATH = "/v3"
_SERVICE = web.AppKey("service", object)
_POLL_INTERVAL = web.AppKey("poll_interval", float)
_OFFLOAD = web.AppKey("offload_calls", bool)
_NODE_PATHS = web.AppKey("node_paths", dict)
_PUBLIC_PATHS = web.AppKey("public_paths", frozenset)
_PUBLIC_PREFIXES = web.AppKey("public_prefixes", tuple)
_NODE_LIST = web.AppKey("node_list_body", NodeListBody)
_PRINCIPAL = web.RequestKey("principal", Principal)
_WORKFLOW_ID = "{id:[^/:]+}"
_NODE_ID = "{id:[^/:]+}"

#: The ranges of the wire schema's integer fields.
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

T = TypeVar("T")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class ExtraRoutes:
    """Routes a process adds to the gateway beside the API's own.

    ``add(app, base, principal_of)`` registers them under ``base`` (``/v3``); a handler finds
    its authenticated caller with ``principal_of(request)``. Requests whose path starts with
    one of ``node_paths`` are not an account's: ``check_node_token(token)`` accepts or refuses
    their bearer token instead (raising ``Unauthenticated``). ``public_paths`` need no token
    at all (the process's ``/healthz`` and ``/readyz``), nor do paths starting with one of
    ``public_prefixes`` (the Web UI's pages, which sign their visitors in with a cookie).
    """

    add: Callable[[web.Application, str, Callable[[web.Request], Principal]], None]
    node_paths: tuple[str, ...] = ()
    check_node_token: Callable[[str], None] | None = None
    public_paths: tuple[str, ...] = ()
    public_prefixes: tuple[str, ...] = ()


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
    app = web.Application(
        # handlers run on the home loop unless marked any_thread (gateway_thread): a
        # GatewayThread serves the app from a loop of its own
        middlewares=[_error_middleware, _auth_middleware, home_loop_middleware],
        client_max_size=MAX_BODY_BYTES,
        handler_args=HANDLER_LIMITS,
    )
    app[_SERVICE] = service
    app[_POLL_INTERVAL] = poll_interval
    app[_OFFLOAD] = offload_calls
    app[HOME_LOOP] = HomeLoop()
    app[_NODE_LIST] = NodeListBody()
    app[_NODE_PATHS] = {
        prefix: extra.check_node_token
        for extra in extra_routes
        if extra.check_node_token is not None
        for prefix in extra.node_paths
    }
    app[_PUBLIC_PATHS] = frozenset(
        [*VERSION_PATHS, *(path for extra in extra_routes for path in extra.public_paths)]
    )
    app[_PUBLIC_PREFIXES] = tuple(
        prefix for extra in extra_routes for prefix in extra.public_prefixes
    )
    app.on_response_prepare.append(_security_headers)
    base = BASE_PATH
    app.router.add_get(f"{base}/version", _version)
    app.router.add_get("/version", _version)
    app.router.add_get(f"{base}/openapi.json", _openapi)
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
# Middleware: errors, authentication and security headers

#: answered without a token: clients probe ``/v2/version``, ``/v3/version``... for the API's
#: base before they log in (the other versions' paths are 404, so the probe goes on to /v3)
VERSION_PATHS = ("/version", f"{BASE_PATH}/version")
#: what every response carries (no MIME sniffing, no referrer, not framed)
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
#: what HTTPS responses carry besides: browsers keep to HTTPS for a year
HSTS = "max-age=31536000; includeSubDomains"


async def _security_headers(request: web.Request, response: web.StreamResponse) -> None:
    # on_response_prepare: also errors, aiohttp's own answers and streamed logs
    response.headers.update(SECURITY_HEADERS)
    if request.secure:
        response.headers["Strict-Transport-Security"] = HSTS


#: what a 401 says a request needs (RFC 6750): a bearer token
WWW_AUTHENTICATE = 'Bearer realm="fuzzball"'


def status_response(error: FuzzballError) -> web.Response:
    """The google.rpc.Status reply for ``error`` with its HTTP status; a 401 says with
    ``WWW-Authenticate`` that a bearer token is what is wanted."""
    response = web.json_response(error.to_status(), status=error.http_status)
    if error.http_status == 401:
        response.headers["WWW-Authenticate"] = WWW_AUTHENTICATE
    return response


@web.middleware
async def _error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except FuzzballError as exc:
        return status_response(exc)
    except web.HTTPException as exc:  # aiohttp's own: no route, no such method, body too large
        response = status_response(status_of_http_exception(exc, request))
        if "Allow" in exc.headers:  # a 405 says which methods the path takes
            response.headers["Allow"] = exc.headers["Allow"]
        return response
    except Exception as exc:
        unavailable = unreachable_error(exc)
        if unavailable is not None:  # the database server is away: no bug, no traceback
            log.warning("REST %s %s: %s (%s)", request.method, request.path, unavailable, exc)
            return status_response(unavailable)
        log.exception("REST %s %s failed", request.method, request.path)
        return status_response(Internal("internal error; the server log has the details"))


@web.middleware
async def _auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    # Unknown paths answer 404 before credentials are looked at, so that clients can probe
    # for the API's version prefix.
    public = request.app[_PUBLIC_PATHS]
    if request.path in public or request.path.startswith(request.app[_PUBLIC_PREFIXES]):
        return await handler(request)
    if request.match_info.http_exception is None:
        node_check = _node_token_check(request)
        if node_check is not None:
            node_check(bearer_token(request))
            return await handler(request)
        token = bearer_token(request)
        if _authenticated_elsewhere(request, token):
            request[_TOKEN] = token
            return await handler(request)
        request[_PRINCIPAL] = _authenticated(request, token)
    return await handler(request)


def _authenticated(request: web.Request, token: str) -> Principal:
    """The caller ``token`` (and a Federate's forwarded identity) names, or Unauthenticated."""
    service = _service(request)
    who = service.authenticate(token)
    forwarded = request.headers.get(FORWARDED_IDENTITY)
    if forwarded is not None:  # a Federate calling for one of its users: act as them
        who = service.forwarded_principal(who, forwarded)
    return who.coming_from(request.remote or "")


def _authenticated_elsewhere(request: web.Request, token: str) -> bool:
    """Whether the list server authenticates this request's caller: a list it serves, for
    an account's API token (a login's JWT, or a Federate's forwarded identity, is checked
    against what this process holds: the OIDC issuer's keys, the trusted Federates)."""
    return (
        request.match_info.handler in _LISTS_SERVED_ELSEWHERE
        and not request.query  # a page, or a refusal of its parameters, is made here
        and _LIST_SERVER in request.app
        and FORWARDED_IDENTITY not in request.headers
        and not looks_like_jwt(token)
    )


def _node_token_check(request: web.Request) -> Callable[[str], None] | None:
    """The node-token check of the extra routes ``request`` is for, if it is for one."""
    checks: dict[str, Callable[[str], None]] = request.app[_NODE_PATHS]
    for prefix, check in checks.items():
        if request.path.startswith(prefix):
            return check
    return None


def bearer_token(request: web.Request) -> str:
    """The request's bearer token (``Authorization: Bearer <token>``); Unauthenticated
    saying what is wrong when there is none (a route that acts on the token itself, such as
    a Federate ending its registration, reads it here)."""
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated(
            "missing credentials: send the header 'Authorization: Bearer <token>'"
        )
    # aiohttp reads header bytes past ASCII as surrogate escapes; no token holds them.
    if not token.isascii() or not token.strip().isprintable():
        raise Unauthenticated("Authorization: a bearer token is printable ASCII")
    return token.strip()


def _service(request: web.Request) -> OrchestrateService:
    return request.app[_SERVICE]  # type: ignore[return-value]


def _principal(request: web.Request) -> Principal:
    return request[_PRINCIPAL]


async def _run(request: web.Request, call: Callable[[OrchestrateService, Principal], T]) -> T:
    """``call(service, caller)``, in a worker thread when the app offloads calls or the
    request is served off the home loop (a gateway thread's loop then keeps serving)."""
    service, who = _service(request), _principal(request)
    if request.app[_OFFLOAD] or request.app[HOME_LOOP].elsewhere() is not None:
        return await asyncio.to_thread(call, service, who)
    return call(service, who)


# ---------------------------------------------------------------------------------------------
# Request parsing


async def _json_body(request: web.Request) -> Any:
    """The request's JSON body, read within bounds (``json_body``) but not yet checked
    against a message."""
    return parse_json_body(await request.read())


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


#: the query parameters of ``:log``
_LOG_PARAMETERS = ("name", "taskId", "show.follow", "show.tail", "pageSize", "pageToken")
#: the ``show.tail`` that asks for no tail (the whole log), as clients have sent it
NO_TAIL = -1


def _takes_only(request: web.Request, *known: str) -> None:
    """InvalidArgument naming the first query parameter the route does not take."""
    takes = f"it takes {', '.join(known)}" if known else "it takes none"
    refuse_unknown(request.query, known, why=f"not a parameter of this route ({takes})")


def _query_bool(request: web.Request, name: str) -> bool:
    value = request.query.get(name)
    if value is None or value.lower() in ("false", "0", ""):
        return False
    if value.lower() in ("true", "1"):
        return True
    raise InvalidArgument(f"{name}: expected true or false, got {value!r}")


def _query_int(request: web.Request, name: str) -> int | None:
    """The integer query parameter ``name``, within the int32 the wire schema gives the
    sequence numbers and task ids it stands for; ``None`` when it is absent."""
    value = request.query.get(name)
    if value is None or value == "":
        return None
    return _bounded_int(name, value, INT32_MIN, INT32_MAX)


def _bounded_int(name: str, text: str, low: int, high: int) -> int:
    """``text`` as an integer from ``low`` to ``high``; ``InvalidArgument`` naming ``name``.

    The text is measured before it is read: Python refuses to read more than 4,300 digits,
    and the store's columns hold 64 bits.
    """
    digits = text.strip().removeprefix("-").removeprefix("+")
    if not (digits.isascii() and digits.isdigit()):
        raise InvalidArgument(f"{name}: expected an integer, got {_shown(text)}")
    number = int(text) if len(digits) <= 20 else None
    if number is None or not low <= number <= high:
        raise InvalidArgument(f"{name}: out of range; expected an integer from {low} to {high}")
    return number


def _shown(text: str) -> str:
    """``text`` as an error message quotes it: short, and escaped as Python writes it."""
    return repr(text if len(text) <= 40 else text[:40] + "...")


# ---------------------------------------------------------------------------------------------
# Handlers, each declaring for the OpenAPI document what it takes and answers

_WORKFLOWS, _NODES, _MISC = ("workflows",), ("nodes",), ("server",)
_AFTER_SEQ = Query("afterSeq", "integer", "only events after this sequence number")


@documented(Operation("the server's version", pb.GetVersionResponse, tags=_MISC))
@any_thread
async def _version(request: web.Request) -> web.Response:
    return _reply(
        pb.GetVersionResponse(
            version=FUZZBALL_API_RELEASE, server_version=_service(request).version()
        )
    )


@any_thread
async def _openapi(request: web.Request) -> web.Response:
    """This gateway's OpenAPI document (``openapi``), every route it serves."""
    version = _service(request).version()
    public: frozenset[str] = request.app[_PUBLIC_PATHS]
    document = openapi_document(request.app, title="Fuzzball", version=version, public_paths=public)
    return web.json_response(document)


@documented(
    Operation(
        "start a workflow",
        pb.StartWorkflowResponse,
        request=pb.StartWorkflowRequest,
        tags=_WORKFLOWS,
    )
)
async def _start_workflow(request: web.Request) -> web.Response:
    sent = await _json_body(request)
    body = parse_request(sent, pb.StartWorkflowRequest, ignored=START_FIELDS_CHECKED_APART)
    source, name = _source(body, sent), workflow_name(body)
    service = _service(request)
    extra = start_request_fields(sent, pins_clusters=getattr(service, "PINS_CLUSTERS", False))
    if extra.cluster_id:
        source["cluster_id"] = extra.cluster_id
    started = await service.start_workflow_async(_principal(request), name=name, **source)
    # the request's own warnings first, then the workflow's
    warnings = (*extra.warnings, *started.warnings)
    return _reply(msg.started_message(dataclasses.replace(started, warnings=warnings)))


@documented(
    Operation(
        "validate a workflow without storing it",
        pb.ValidateWorkflowResponse,
        request=pb.ValidateWorkflowRequest,
        tags=_WORKFLOWS,
    )
)
async def _validate_workflow(request: web.Request) -> web.Response:
    sent = await _json_body(request)
    source = _source(parse_request(sent, pb.ValidateWorkflowRequest), sent)
    warnings = await _run(request, lambda s, who: s.validate_workflow(who, **source))
    return _reply(pb.ValidateWorkflowResponse(warnings=warnings))


#: the workflow list's status filters (the swagger's; ``status`` is its deprecated one)
_STATUSES, _STATUS = "requestedStatuses", "status"
_STATUS_NAMES = frozenset(pb.WorkflowStatus.keys())


def workflow_list_text(workflows: Iterable[WorkflowView], page_token: str | None = None) -> str:
    """The JSON text of a ``ListWorkflowsResponse`` of ``workflows``; with ``page_token``
    (a page of the list), its ``pageToken`` ("" on the last page)."""
    message = pb.ListWorkflowsResponse(workflows=[msg.workflow_message(w) for w in workflows])
    body = to_json(message)
    if page_token is not None:
        body["pageToken"] = page_token
    return json.dumps(body)


class ListServer(Protocol):
    """Where the workflow and node lists are served when not in this process (Orchestrate's
    list worker: :mod:`fuzzball_core.orchestrate.list_worker`)."""

    async def call(self, route: str, caller: Principal | str) -> tuple[int, bytes] | None:
        """The HTTP status and JSON body (UTF-8) of the list ``route`` (``workflows``,
        ``nodes``) for ``caller``: a caller authenticated here, or an account's API token for
        the server to authenticate (its refusal is the answer, as here); ``None`` when it
        cannot answer now (the list is then served here)."""
        ...


_LIST_SERVER = web.AppKey("list_server", ListServer)


def serve_lists_from(app: web.Application, server: ListServer) -> None:
    """Hand ``app``'s workflow and node lists to ``server`` once their caller is
    authenticated (before the app is served)."""
    app[_LIST_SERVER] = server


#: the request's bearer token, where the list server authenticates its caller
_TOKEN = web.RequestKey("token", str)


async def _served_elsewhere(request: web.Request, route: str) -> web.Response | None:
    """The list ``route`` as the app's list server answered it, if it has one that did."""
    server = request.app.get(_LIST_SERVER)
    if server is None:
        return None
    # authenticating a list's caller took the engine's GIL at each GET: the list server
    # does it, over its own connection to the store, unless the caller was already
    token = request.get(_TOKEN)
    answer = await server.call(route, _principal(request) if token is None else token)
    if answer is None:
        if token is not None:  # served here after all: authenticated here
            request[_PRINCIPAL] = _authenticated(request, token)
        return None
    status, body = answer
    # relayed as the bytes it came as: 5,000 nodes' text is 1.8 MB
    return web.Response(body=body, status=status, content_type="application/json", charset="utf-8")


@documented(
    Operation(
        "the caller's workflows, newest first (with pageSize or pageToken: one page, and the"
        " next page's token in pageToken)",
        pb.ListWorkflowsResponse,
        query=(
            Query("pageSize", "integer", f"one page of at most this many (at most {MAX_PAGE})"),
            Query("pageToken", "string", "the page after the one that answered this token"),
            Query(
                _STATUSES,
                "string",
                "only workflows of these statuses (repeat the parameter for several;"
                " STAGE_STATUS_UNSPECIFIED is pending)",
            ),
            Query(_STATUS, "string", f"one status (deprecated: {_STATUSES} takes several)"),
        ),
        tags=_WORKFLOWS,
    )
)
@any_thread
async def _list_workflows(request: web.Request) -> web.Response:
    refuse_unknown(
        request.query,
        (*PAGE_PARAMETERS, _STATUSES, _STATUS),
        why="not supported; workflows are listed newest first",
    )
    if not request.query:  # the whole list, where lists are served
        served = await _served_elsewhere(request, "workflows")
        if served is not None:
            return served
    wanted = _requested_statuses(request.query)
    workflows = await _run(request, lambda s, who: s.list_workflows(who))
    if not request.query:
        return web.json_response(text=workflow_list_text(workflows))
    if wanted:
        workflows = [w for w in workflows if w.status in wanted]
    page, token = keyed_page(
        request.query, workflows, lambda w: (w.created_at, w.id), default=MAX_PAGE
    )
    return web.json_response(text=workflow_list_text(page, token))


def _requested_statuses(query: MultiMapping[str]) -> frozenset[str]:
    """The view statuses ``requestedStatuses`` (repeated) and ``status`` ask for (empty:
    every status); InvalidArgument naming a value that is no ``WorkflowStatus``."""
    wanted = set()
    for name in (_STATUSES, _STATUS):
        for value in query.getall(name, ()):
            if value not in _STATUS_NAMES:
                known = ", ".join(pb.WorkflowStatus.keys())
                raise InvalidArgument(f"{name}: {value[:60]!r} is not one of {known}")
            wanted.add(msg.status_of(pb.WorkflowStatus.Value(value)).value)
    return frozenset(wanted)


@documented(Operation("one workflow with its stages", pb.Workflow, tags=_WORKFLOWS))
@any_thread
async def _get_workflow(request: web.Request) -> web.Response:
    _takes_only(request)
    workflow_id = request.match_info["id"]
    workflow = await _run(request, lambda s, who: s.get_workflow(who, workflow_id))
    return _reply(msg.workflow_message(workflow))


@documented(
    Operation(
        "a workflow's status and its stages' statuses",
        pb.GetWorkflowStatusResponse,
        query=(Query("force", "boolean", "accepted: a status is always read as it is now"),),
        tags=_WORKFLOWS,
    )
)
@any_thread
async def _workflow_status(request: web.Request) -> web.Response:
    _takes_only(request, "force")
    _query_bool(request, "force")  # checked: a status is always read as it is now
    workflow_id = request.match_info["id"]
    workflow = await _run(request, lambda s, who: s.get_workflow(who, workflow_id))
    return _reply(msg.workflow_status_message(workflow))


@documented(
    Operation(
        "cancel a workflow",
        pb.WorkflowIdResponse,
        query=(Query("force", "boolean", "accepted: a stop always kills what runs at once"),),
        tags=_WORKFLOWS,
    )
)
async def _stop_workflow(request: web.Request) -> web.Response:
    _takes_only(request, "force")
    _query_bool(request, "force")  # checked: a stop always kills what runs at once
    workflow_id = request.match_info["id"]
    note = await _run(request, lambda s, who: s.stop_workflow(who, workflow_id))
    return _reply(pb.WorkflowIdResponse(id=workflow_id, message=note))


@documented(
    Operation(
        "a workflow's events",
        pb.ListEventsResponse,
        query=(_AFTER_SEQ,),
        tags=_WORKFLOWS,
    )
)
@any_thread
async def _workflow_events(request: web.Request) -> web.Response:
    _takes_only(request, "afterSeq")
    after_seq = _query_int(request, "afterSeq") or 0
    workflow_id = request.match_info["id"]
    events = await _run(
        request, lambda s, who: s.list_events(who, workflow_id, after_seq=after_seq)
    )
    return _reply(pb.ListEventsResponse(events=[msg.event_message(e) for e in events]))


@documented(Operation("a node's events", pb.ListEventsResponse, query=(_AFTER_SEQ,), tags=_NODES))
@any_thread
async def _node_events(request: web.Request) -> web.Response:
    after_seq = _query_int(request, "afterSeq") or 0
    node_id = request.match_info["id"]
    events = await _run(
        request, lambda s, who: s.list_node_events(who, node_id, after_seq=after_seq)
    )
    return _reply(pb.ListEventsResponse(events=[msg.event_message(e) for e in events]))


@documented(
    Operation(
        "why each stage is where it is",
        pb.ExplainWorkflowResponse,
        query=(Query("all", "boolean", "every stage, finished ones too"),),
        tags=_WORKFLOWS,
    )
)
async def _explain_workflow(request: web.Request) -> web.Response:
    _takes_only(request, "all")
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


@documented(
    Operation(
        "a workflow's output (with pageSize: one page, and the next page's token in the"
        " Next-Page-Token header when there is more)",
        pb.WorkflowLogChunk,
        query=(
            Query("name", "string", "one stage (job name)"),
            Query("taskId", "integer", "one task of a task array"),
            Query("show.follow", "boolean", "keep streaming until the workflow ends"),
            Query("show.tail", "integer", "only the last chunks, counted from the end (-1: all)"),
            Query("pageSize", "integer", "one page of at most this many chunks (0: all)"),
            Query("pageToken", "string", "the page after the one whose token this is"),
        ),
        stream=True,
        tags=_WORKFLOWS,
    )
)
@any_thread
async def _workflow_log(request: web.Request) -> web.StreamResponse:
    service, who, workflow_id = _service(request), _principal(request), request.match_info["id"]
    for unsupported in ("rank", "command"):  # the swagger's, for output this server keeps not
        if unsupported in request.query:
            raise InvalidArgument(
                f"{unsupported}: not supported; a job's output is read whole, by job (name)"
                " and task (taskId)"
            )
    _takes_only(request, *_LOG_PARAMETERS)
    follow = _query_bool(request, "show.follow")
    tail = _query_int(request, "show.tail")
    if tail is not None and tail < NO_TAIL:
        raise InvalidArgument(f"show.tail: expected 0 or more (or {NO_TAIL}: no tail), got {tail}")
    task_id = _query_int(request, "taskId")
    requested_size = _query_int(request, "pageSize") or 0
    size = page_size(requested_size, "pageSize")
    token = request.query.get("pageToken", "")
    after_seq = page_token_seq(token, "pageToken")
    # Everything that can fail on the request itself fails here, before the 200 is sent.
    stage_name = resolve_stage_name(service, who, workflow_id, request.query.get("name"))
    query = LogQuery(workflow_id, stage_name, task_id)
    if token:
        tail = None  # the tail chose the first page; a token goes on from its page
    if follow:
        followed = follow_logs(
            service,
            who,
            query,
            after_seq=after_seq,
            tail=tail,
            poll_interval=request.app[_POLL_INTERVAL],
        )
        return await _stream_log(request, workflow_id, followed)
    if requested_size:
        page = read_page(service, who, query, after_seq=after_seq, size=size, tail=tail)
        lines = b"".join(
            _log_line("result", to_json(msg.log_chunk_message(c))) for c in page.chunks
        )
        headers = {NEXT_PAGE_TOKEN: page.next_page_token} if page.next_page_token else {}
        return web.Response(body=lines, content_type="application/json", headers=headers)
    # without a page size: all of it, written page by page as it is read; the first page is
    # read before the 200 is sent, so that an unknown workflow is still a 404
    pages = read_all(service, who, query, after_seq=after_seq, tail=tail)
    first = next(pages, [])
    return await _stream_log(request, workflow_id, _each_chunk(itertools.chain([first], pages)))


async def _each_chunk(pages: Iterable[list[LogChunkView]]) -> AsyncIterator[LogChunkView]:
    for page in pages:
        for chunk in page:
            yield chunk


async def _stream_log(
    request: web.Request, workflow_id: str, chunks: AsyncIterator[LogChunkView]
) -> web.StreamResponse:
    """Write ``chunks`` as a log stream; a failure once the 200 is sent is its last line."""
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    await response.prepare(request)
    try:
        async for chunk in chunks:
            await response.write(_log_line("result", to_json(msg.log_chunk_message(chunk))))
    except ConnectionResetError:
        return response  # the client went away; nobody is left to tell
    except FuzzballError as exc:
        await response.write(_log_line("error", exc.to_status()))
    except Exception:
        log.exception("reading the log of workflow %s failed", workflow_id)
        error = Internal("internal error; the server log has the details")
        await response.write(_log_line("error", error.to_status()))
    await response.write_eof()
    return response


@documented(Operation("every registered node", pb.ListNodesResponse, tags=_NODES))
@any_thread
async def _list_nodes(request: web.Request) -> web.Response:
    served = await _served_elsewhere(request, "nodes")
    if served is not None:
        return served
    nodes = await _run(request, lambda s, who: s.list_nodes(who))
    # each node's text is kept between lists (NodeListBody): 5,000 nodes through the proto3
    # JSON mapping at each list held the loop for over half a second
    return web.json_response(text=request.app[_NODE_LIST].body(nodes))


#: the lists a list server (Orchestrate's list worker) serves, authenticating their callers
_LISTS_SERVED_ELSEWHERE = frozenset({_list_workflows, _list_nodes})


@documented(Operation("one node", pb.GetNodeInfo, tags=_NODES))
async def _get_node(request: web.Request) -> web.Response:
    node_id = request.match_info["id"]
    node = await _run(request, lambda s, who: s.get_node(who, node_id))
    return _reply(msg.node_message(node))


@documented(Operation("forget a node", pb.RemoveNodeResponse, tags=_NODES))
async def _remove_node(request: web.Request) -> web.Response:
    node_id = request.match_info["id"]
    await _run(request, lambda s, who: s.remove_node(who, node_id))
    return _reply(pb.RemoveNodeResponse())


@documented(Operation("release a node's admin cordons", pb.UncordonNodeResponse, tags=_NODES))
async def _uncordon_node(request: web.Request) -> web.Response:
    """Release the node's admin cordon holds; the reply lists the holds left in place."""
    node_id = request.match_info["id"]
    released, remaining = await _run(
        request, lambda s, who: (s.uncordon(who, node_id), s.list_holds(who, node_id))
    )
    return _reply(
        pb.UncordonNodeResponse(released=released, holds=[msg.hold_message(h) for h in remaining])
    )


@documented(Operation("a node's holds", pb.ListNodeHoldsResponse, tags=_NODES))
async def _list_holds(request: web.Request) -> web.Response:
    node_id = request.match_info["id"]
    holds = await _run(request, lambda s, who: s.list_holds(who, node_id))
    return _reply(pb.ListNodeHoldsResponse(holds=[msg.hold_message(h) for h in holds]))


@documented(
    Operation(
        "place a hold on a node",
        pb.NodeHold,
        request=pb.AddNodeHoldRequest,
        path_fields=("node_id",),
        tags=_NODES,
    )
)
async def _add_hold(request: web.Request) -> web.Response:
    body = parse_request(await _json_body(request), pb.AddNodeHoldRequest, from_path=("node_id",))
    effect, reason, node_id = hold_effect(body.effect), hold_reason(body), request.match_info["id"]
    hold = await _run(request, lambda s, who: s.add_hold(who, node_id, effect, reason))
    return _reply(msg.hold_message(hold))


@documented(Operation("release one hold", pb.ReleaseNodeHoldResponse, tags=_NODES))
async def _release_hold(request: web.Request) -> web.Response:
    hold_id = _bounded_int("holdId", request.match_info["holdId"], INT64_MIN, INT64_MAX)
    node_id = request.match_info["id"]
    await _run(request, lambda s, who: s.release_hold(who, node_id, hold_id))
    return _reply(pb.ReleaseNodeHoldResponse())
