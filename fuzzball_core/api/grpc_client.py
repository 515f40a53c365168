"""The gRPC client API (``fuzzball.v1`` Version/Workflow/Node services) on a grpc.aio server.

Each call is authenticated from the metadata ``authorization: Bearer <token>`` and answered by
the :class:`OrchestrateService`. A :class:`FuzzballError` becomes the gRPC status of its
``grpc_code`` with its message; anything else is logged here and answered with a bare
INTERNAL, so no traceback ever reaches a client.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NoReturn, TypeVar

import grpc
from google.protobuf.message import DecodeError

from fuzzball_core import FUZZBALL_API_RELEASE
from fuzzball_core.api import proto_messages as msg
from fuzzball_core.api.following import (
    POLL_INTERVAL,
    LogQuery,
    follow_logs,
    page_size,
    page_token_seq,
    read_page,
    resolve_stage_name,
)
from fuzzball_core.api.requests import hold_effect, hold_reason, workflow_name, workflow_source
from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.api.v1 import client_pb2_grpc as pb_grpc
from fuzzball_core.errors import FuzzballError, Internal, InvalidArgument, Unauthenticated
from fuzzball_core.service.contract import OrchestrateService
from fuzzball_core.service.forwarded_identity import HEADER as FORWARDED_IDENTITY
from fuzzball_core.service.views import Principal
from fuzzball_core.store.database import unreachable_error

log = logging.getLogger(__name__)

T = TypeVar("T")


def add_client_servicers(
    server: grpc.aio.Server, service: OrchestrateService, *, poll_interval: float = POLL_INTERVAL
) -> None:
    """Serve the Version, Workflow and Node services of ``fuzzball.v1`` from ``service``;
    a request whose bytes are not its message is answered INVALID_ARGUMENT."""
    tolerant = _TolerantRegistration(server)
    pb_grpc.add_VersionServiceServicer_to_server(_VersionServicer(service), tolerant)
    pb_grpc.add_WorkflowServiceServicer_to_server(
        _WorkflowServicer(service, poll_interval), tolerant
    )
    pb_grpc.add_NodeServiceServicer_to_server(_NodeServicer(service), tolerant)


class _Malformed:
    """A request whose bytes did not parse as its message (invalid UTF-8 in a string, a
    truncated field): what grpc would otherwise answer UNKNOWN, logging a traceback."""

    def __init__(self, error: DecodeError) -> None:
        self.message = f"request: not a valid message: {error}"


def _tolerant_reader(read: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    def tolerant(data: bytes) -> Any:
        try:
            return read(data)
        except DecodeError as exc:
            return _Malformed(exc)

    return tolerant


def _refusing_malformed(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """``handler`` reading its request tolerantly and refusing a malformed one."""
    unary, streaming = handler.unary_unary, handler.unary_stream
    if unary is not None:

        async def answer(request: Any, context: grpc.aio.ServicerContext) -> Any:
            if isinstance(request, _Malformed):
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.message)
            return await unary(request, context)

        return handler._replace(
            request_deserializer=_tolerant_reader(handler.request_deserializer),
            unary_unary=answer,
        )
    if streaming is not None:

        async def stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            if isinstance(request, _Malformed):
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.message)
            async for item in streaming(request, context):
                yield item

        return handler._replace(
            request_deserializer=_tolerant_reader(handler.request_deserializer),
            unary_stream=stream,
        )
    return handler  # no client-streaming calls in fuzzball.v1


class _TolerantRegistration:
    """What the generated ``add_*_to_server`` functions register on, passing each method
    handler on to ``server`` as :func:`_refusing_malformed` makes it."""

    def __init__(self, server: grpc.aio.Server) -> None:
        self._server = server

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        """Ignored: the same handlers come by ``add_registered_method_handlers``."""

    def add_registered_method_handlers(
        self, service_name: str, handlers: dict[str, grpc.RpcMethodHandler]
    ) -> None:
        wrapped = {name: _refusing_malformed(handler) for name, handler in handlers.items()}
        generic = grpc.method_handlers_generic_handler(service_name, wrapped)
        self._server.add_generic_rpc_handlers((generic,))
        self._server.add_registered_method_handlers(service_name, wrapped)


def bearer_token(context: grpc.aio.ServicerContext) -> str:
    """The token of the ``authorization`` metadata; ``Unauthenticated`` if there is none."""
    for key, value in context.invocation_metadata() or ():
        if key.lower() == "authorization":
            text = value.decode() if isinstance(value, bytes) else value
            scheme, _, token = text.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
    raise Unauthenticated("missing credentials: send the metadata 'authorization: Bearer <token>'")


def caller(service: OrchestrateService, context: grpc.aio.ServicerContext) -> Principal:
    """Who calls: the bearer token's owner, or, with a Federate's forwarded identity in the
    metadata (the REST header's name, lower case), the caller it names (``forwarded_
    principal``, Unauthenticated unless a trusted Federate signed it)."""
    who = service.authenticate(bearer_token(context))
    for key, value in context.invocation_metadata() or ():
        if key.lower() == FORWARDED_IDENTITY.lower():
            text = value.decode() if isinstance(value, bytes) else value
            who = service.forwarded_principal(who, text)
            break
    return who.coming_from(peer_address(context.peer() or ""))


def peer_address(peer: str) -> str:
    """The address in a gRPC peer (``ipv4:127.0.0.1:5000``, ``ipv6:[::1]:5000``), without
    its port; a ``unix:`` peer as it is."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        return rest.rpartition(":")[0]
    if kind == "ipv6":
        return rest.rpartition(":")[0].strip("[]")
    return peer


async def _abort(context: grpc.aio.ServicerContext, exc: Exception) -> NoReturn:
    if not isinstance(exc, FuzzballError):
        unavailable = unreachable_error(exc)
        if unavailable is not None:  # the database server is away: no bug, no traceback
            log.warning("gRPC call: %s (%s)", unavailable, exc)
            exc = unavailable
        else:
            log.error("gRPC call failed", exc_info=exc)
            exc = Internal("internal error; the server log has the details")
    await context.abort(exc.grpc_code, exc.message)
    raise AssertionError("context.abort returned")  # abort always raises


class _Servicer:
    def __init__(self, service: OrchestrateService) -> None:
        self.service = service

    async def _answer(
        self, context: grpc.aio.ServicerContext, respond: Callable[[Principal], T | Awaitable[T]]
    ) -> T:
        """Authenticate, then ``respond(principal)``; errors become the call's status."""
        try:
            answer = respond(caller(self.service, context))
            return await answer if inspect.isawaitable(answer) else answer
        except Exception as exc:
            await _abort(context, exc)


def _required(value: str, field: str) -> str:
    if not value:
        raise InvalidArgument(f"{field}: required")
    return value


#: What a start or validate request without a source is told.
_NO_SOURCE = "source: raw_specification or definition is required"


class _VersionServicer(_Servicer, pb_grpc.VersionServiceServicer):
    async def GetVersion(self, request: pb.GetVersionRequest, context: Any) -> Any:
        return await self._answer(
            context,
            lambda who: pb.GetVersionResponse(
                version=FUZZBALL_API_RELEASE, server_version=self.service.version()
            ),
        )


class _WorkflowServicer(_Servicer, pb_grpc.WorkflowServiceServicer):
    def __init__(self, service: OrchestrateService, poll_interval: float) -> None:
        super().__init__(service)
        self.poll_interval = poll_interval

    async def StartWorkflow(self, request: pb.StartWorkflowRequest, context: Any) -> Any:
        async def respond(who: Principal) -> pb.StartWorkflowResponse:
            source = workflow_source(request, missing=_NO_SOURCE)
            started = await self.service.start_workflow_async(
                who, name=workflow_name(request), **source
            )
            return msg.started_message(started)

        return await self._answer(context, respond)

    async def ValidateWorkflow(self, request: pb.ValidateWorkflowRequest, context: Any) -> Any:
        def respond(who: Principal) -> pb.ValidateWorkflowResponse:
            source = workflow_source(request, missing=_NO_SOURCE)
            warnings = self.service.validate_workflow(who, **source)
            return pb.ValidateWorkflowResponse(warnings=warnings)

        return await self._answer(context, respond)

    async def ListWorkflows(self, request: pb.ListWorkflowsRequest, context: Any) -> Any:
        def respond(who: Principal) -> pb.ListWorkflowsResponse:
            workflows = self.service.list_workflows(who)
            return pb.ListWorkflowsResponse(workflows=[msg.workflow_message(w) for w in workflows])

        return await self._answer(context, respond)

    async def GetWorkflow(self, request: pb.WorkflowIdRequest, context: Any) -> Any:
        return await self._answer(
            context,
            lambda who: msg.workflow_message(
                self.service.get_workflow(who, _required(request.id, "id"))
            ),
        )

    async def GetWorkflowStatus(self, request: pb.WorkflowIdRequest, context: Any) -> Any:
        return await self._answer(
            context,
            lambda who: msg.workflow_status_message(
                self.service.get_workflow(who, _required(request.id, "id"))
            ),
        )

    async def StopWorkflow(self, request: pb.WorkflowIdRequest, context: Any) -> Any:
        def respond(who: Principal) -> pb.WorkflowIdResponse:
            note = self.service.stop_workflow(who, _required(request.id, "id"))
            return pb.WorkflowIdResponse(id=request.id, message=note)

        return await self._answer(context, respond)

    async def ListEvents(self, request: pb.ListEventsRequest, context: Any) -> Any:
        def respond(who: Principal) -> pb.ListEventsResponse:
            events = self.service.list_events(
                who, _required(request.workflow_id, "workflow_id"), after_seq=request.after_seq
            )
            return pb.ListEventsResponse(events=[msg.event_message(e) for e in events])

        return await self._answer(context, respond)

    async def ReadLogs(self, request: pb.ReadLogsRequest, context: Any) -> Any:
        def respond(who: Principal) -> pb.ReadLogsResponse:
            page = read_page(
                self.service,
                who,
                self._log_query(who, request),
                after_seq=_log_start(request),
                size=page_size(request.page_size, "page_size"),
                tail=_log_tail(request),
            )
            return pb.ReadLogsResponse(
                chunks=[msg.log_chunk_message(c) for c in page.chunks],
                next_page_token=page.next_page_token,
            )

        return await self._answer(context, respond)

    async def FollowLogs(
        self, request: pb.ReadLogsRequest, context: Any
    ) -> AsyncIterator[pb.WorkflowLogChunk]:
        try:
            who = caller(self.service, context)
            chunks = follow_logs(
                self.service,
                who,
                self._log_query(who, request),
                after_seq=_log_start(request),
                tail=_log_tail(request),
                poll_interval=self.poll_interval,
            )
            async for chunk in chunks:
                yield msg.log_chunk_message(chunk)
        except Exception as exc:
            await _abort(context, exc)

    def _log_query(self, who: Principal, request: pb.ReadLogsRequest) -> LogQuery:
        workflow_id = _required(request.workflow_id, "workflow_id")
        return LogQuery(
            workflow_id,
            resolve_stage_name(self.service, who, workflow_id, request.stage_name),
            request.task_id if request.HasField("task_id") else None,
        )

    async def ExplainWorkflow(self, request: pb.ExplainWorkflowRequest, context: Any) -> Any:
        def respond(who: Principal) -> pb.ExplainWorkflowResponse:
            explanations = self.service.explain_workflow(
                who,
                _required(request.workflow_id, "workflow_id"),
                include_finished=request.include_finished,
            )
            return pb.ExplainWorkflowResponse(
                stages=[msg.explanation_message(e) for e in explanations]
            )

        return await self._answer(context, respond)


class _NodeServicer(_Servicer, pb_grpc.NodeServiceServicer):
    async def ListNodes(self, request: pb.ListNodesRequest, context: Any) -> Any:
        return await self._answer(
            context,
            lambda who: pb.ListNodesResponse(
                nodes=[msg.node_list_message(n) for n in self.service.list_nodes(who)]
            ),
        )

    async def GetNode(self, request: pb.GetNodeRequest, context: Any) -> Any:
        return await self._answer(
            context,
            lambda who: msg.node_message(self.service.get_node(who, _required(request.id, "id"))),
        )

    async def RemoveNode(self, request: pb.NodeIdRequest, context: Any) -> Any:
        def respond(who: Principal) -> pb.RemoveNodeResponse:
            self.service.remove_node(who, _required(request.node_id, "node_id"))
            return pb.RemoveNodeResponse()

        return await self._answer(context, respond)

    async def ListNodeHolds(self, request: pb.NodeIdRequest, context: Any) -> Any:
        def respond(who: Principal) -> pb.ListNodeHoldsResponse:
            holds = self.service.list_holds(who, _required(request.node_id, "node_id"))
            return pb.ListNodeHoldsResponse(holds=[msg.hold_message(h) for h in holds])

        return await self._answer(context, respond)

    async def AddNodeHold(self, request: pb.AddNodeHoldRequest, context: Any) -> Any:
        def respond(who: Principal) -> pb.NodeHold:
            node_id = _required(request.node_id, "node_id")
            effect, reason = hold_effect(request.effect), hold_reason(request)
            return msg.hold_message(self.service.add_hold(who, node_id, effect, reason))

        return await self._answer(context, respond)

    async def ReleaseNodeHold(self, request: pb.ReleaseNodeHoldRequest, context: Any) -> Any:
        def respond(who: Principal) -> pb.ReleaseNodeHoldResponse:
            if request.hold_id <= 0:
                raise InvalidArgument("hold_id: required (a positive hold id)")
            self.service.release_hold(who, _required(request.node_id, "node_id"), request.hold_id)
            return pb.ReleaseNodeHoldResponse()

        return await self._answer(context, respond)

    async def UncordonNode(self, request: pb.NodeIdRequest, context: Any) -> Any:
        def respond(who: Principal) -> pb.UncordonNodeResponse:
            node_id = _required(request.node_id, "node_id")
            released = self.service.uncordon(who, node_id)
            remaining = self.service.list_holds(who, node_id)
            return pb.UncordonNodeResponse(
                released=released, holds=[msg.hold_message(h) for h in remaining]
            )

        return await self._answer(context, respond)


def _log_start(request: pb.ReadLogsRequest) -> int:
    """Where a log read starts: after its page token's chunk, or after ``after_seq``."""
    return max(request.after_seq, page_token_seq(request.page_token, "page_token"))


def _log_tail(request: pb.ReadLogsRequest) -> int | None:
    # the tail chose the first page; a token goes on from its page
    return request.tail if request.HasField("tail") and not request.page_token else None
