"""The node API's gRPC servicer: Register, and the Connect stream of each Substrate.

A node authenticates with the shared node token (``orchestrate.node-token``), or, when it was
provisioned, with its instance's own registration token (good for that node's name only, while
the instance lives; docs/provisioners.md). ``RunSecrets`` answers a node about the runs placed
on it only (:class:`~fuzzball_core.orchestrate.run_secrets.CallingNode`). On Connect,
its first message is a Hello listing the runs it knows; the engine reconciles those, then the
stream carries assignments and cancellations down and reports up until either side ends it.
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import AsyncIterator

import grpc

from fuzzball_core.api.v1 import node_pb2, node_pb2_grpc
from fuzzball_core.errors import FuzzballError
from fuzzball_core.orchestrate import nodes
from fuzzball_core.orchestrate.engine import Engine
from fuzzball_core.orchestrate.node_arrivals import Arrivals, Registration
from fuzzball_core.orchestrate.node_hub import NodeHub, NodeQueue
from fuzzball_core.orchestrate.node_metrics import NodeMonitoring
from fuzzball_core.orchestrate.provisioning import Provisioning
from fuzzball_core.orchestrate.run_secrets import CallingNode, RunSecretsService
from fuzzball_core.scheduling import CpuCore, Resources


class NodeAgentServicer(node_pb2_grpc.NodeAgentServicer):
    """Serves Substrate agents."""

    def __init__(
        self,
        engine: Engine,
        hub: NodeHub,
        node_token: str,
        run_secrets: RunSecretsService | None = None,
        monitoring: NodeMonitoring | None = None,
        provisioning: Provisioning | None = None,
    ) -> None:
        self.engine = engine
        #: the provisioning loop: whose registration tokens provisioned nodes present
        self.provisioning = provisioning
        self.hub = hub
        self._token = node_token
        #: told of registrations and of answers to relayed scrapes
        self.monitoring = monitoring
        self.run_secrets = run_secrets
        #: Registers and Hellos arriving together are applied in one transaction
        self.arrivals = Arrivals(engine.context, engine.arrivals_change)

    async def _authenticate(
        self, context: grpc.aio.ServicerContext, node_name: str | None = None
    ) -> str | None:
        """Check the caller's token. Return None for the shared node token, or the token
        itself when it is a provisioned instance's (valid for ``node_name`` when given)."""
        presented = dict(context.invocation_metadata() or ()).get("authorization", "")
        if self._token and hmac.compare_digest(
            presented.encode(), f"Bearer {self._token}".encode()
        ):
            return None
        token = presented.removeprefix("Bearer ")
        instance = self.provisioning.holder(token) if self.provisioning and token else None
        if instance is not None and node_name in (None, instance.name):
            return token
        if not self._token and (self.provisioning is None or not self.provisioning.definitions):
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                "orchestrate.node-token is not set: no node may connect",
            )
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, "the node token is not valid")
        raise AssertionError  # abort raises; for the type checker

    async def Register(
        self, request: node_pb2.RegisterRequest, context: grpc.aio.ServicerContext
    ) -> node_pb2.RegisterResponse:
        instance_token = await self._authenticate(context, request.name)
        annotations = dict(request.annotations)
        try:
            if instance_token is not None and self.provisioning is not None:
                # its definition's and instance's annotations, whatever the node says
                annotations = await asyncio.to_thread(
                    self.provisioning.register, request.name, instance_token, annotations
                )
            capacity = Resources(
                request.capacity.cores, request.capacity.memory, dict(request.capacity.devices)
            )
            node_id = await self.arrivals.register(
                Registration(
                    request.name,
                    capacity,
                    annotations,
                    device_plugin_failed=request.device_plugin_failed,
                    address=request.address,
                    cpu_topology=[
                        CpuCore(core.id, core.socket, core.numa, tuple(core.threads))
                        for core in request.cpu_cores
                    ],
                    version=request.version,
                    health_disabled=request.health_disabled,
                )
            )
        except FuzzballError as exc:
            await context.abort(exc.grpc_code, exc.message)
        if self.monitoring is not None:
            self.monitoring.registered(node_id, request)
        return node_pb2.RegisterResponse(node_id=node_id, lease_seconds=self.engine.lease_seconds)

    async def RunSecrets(
        self, request: node_pb2.RunSecretsRequest, context: grpc.aio.ServicerContext
    ) -> node_pb2.RunSecretsResponse:
        """The secrets and workflow token a run needs, as its node starts it: the node asking
        is told of the runs placed on it only."""
        caller = await self._calling_node(request, context)
        if self.run_secrets is None:
            return node_pb2.RunSecretsResponse()  # no secrets kept here: nothing to resolve
        try:  # on the loop: the engine's plans are read there only
            return self.run_secrets.for_run(request.run_id, caller)
        except FuzzballError as exc:  # its message names the field, never a value
            await context.abort(exc.grpc_code, exc.message)
            raise  # abort raises; for the type checker

    async def _calling_node(
        self, request: node_pb2.RunSecretsRequest, context: grpc.aio.ServicerContext
    ) -> CallingNode:
        """The node a ``RunSecrets`` call comes from: the one its request names, and, with a
        provisioned instance's token, the one that token registers (whatever the request
        names). The shared node token is good for any node, so its caller must name one."""
        instance_token = await self._authenticate(context)
        if instance_token is None:
            if not request.node_id:
                await context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    "node_id: RunSecrets with the node token must name the calling node "
                    "(an agent of an earlier release names none: upgrade it)",
                )
            return CallingNode(request.node_id)
        instance = self.provisioning.holder(instance_token) if self.provisioning else None
        if instance is None:  # deleted since it authenticated
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "the node token is not valid")
            raise AssertionError  # abort raises; for the type checker
        return CallingNode(request.node_id, bound_name=instance.name)

    async def Connect(
        self,
        request_iterator: AsyncIterator[node_pb2.NodeMessage],
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[node_pb2.ControlMessage]:
        instance_token = await self._authenticate(context)
        first = await anext(aiter(request_iterator), None)
        if first is None or first.WhichOneof("kind") != "hello":
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, "the first message on Connect must be a Hello"
            )
            return  # abort raises; this tells the type checker ``first`` is a Hello below
        node_id = first.hello.node_id
        if instance_token is not None and self.provisioning is not None:
            instance = self.provisioning.holder(instance_token)
            if instance is None or self.engine.context.node_names.get(node_id) != instance.name:
                await context.abort(
                    grpc.StatusCode.PERMISSION_DENIED,
                    "a provisioned node's token connects that node only",
                )
        queue = self.hub.attach(node_id, batches=first.hello.accepts_batches)
        try:
            unwanted = await self.arrivals.hello(
                node_id, first.hello.running_run_ids, first.hello.workflow_ids
            )
        except BaseException as exc:  # refused, or the call went while its Hello waited
            self.stream_ended(node_id, queue)
            if isinstance(exc, FuzzballError):
                await context.abort(exc.grpc_code, exc.message)
            raise
        reader = asyncio.create_task(self._read(node_id, request_iterator, queue))
        try:
            yield node_pb2.ControlMessage(
                welcome=nodes.welcome(self.engine.context, node_id, unwanted)
            )
            while (message := await queue.next_write()) is not None:
                yield message
        finally:
            reader.cancel()
            self.stream_ended(node_id, queue)

    def stream_ended(self, node_id: str, queue: NodeQueue) -> None:
        """The stream of ``queue`` ended: if it was still the node's (not replaced by a new
        one, nor ended by Orchestrate's shutdown), the node has a grace to come back
        (:func:`~fuzzball_core.orchestrate.nodes.stream_grace`) instead of its whole lease."""
        if self.hub.detach(node_id, queue):
            self.engine.node_stream_closed(node_id)

    async def _read(
        self,
        node_id: str,
        request_iterator: AsyncIterator[node_pb2.NodeMessage],
        queue: NodeQueue,
    ) -> None:
        try:
            async for written in request_iterator:
                # a batch is its messages, in order (one write carries what the agent had)
                batch = written.WhichOneof("kind") == "batch"
                for message in written.batch.messages if batch else (written,):
                    if message.WhichOneof("kind") == "metrics":
                        if self.monitoring is not None:  # a relayed scrape's answer
                            self.monitoring.answered(node_id, message.metrics)
                        continue
                    self.engine.node_message(node_id, message)
        except (grpc.aio.AioRpcError, asyncio.CancelledError):
            pass
        finally:
            queue.put_nowait(None)
