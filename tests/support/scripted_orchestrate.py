"""A scripted Orchestrate for tests of the real node agent: a ``NodeAgent`` gRPC server on
loopback that registers any node, welcomes each stream, sends down it whatever the test
queues, records everything the agent sends up, and hangs up when told (the agent then
reconnects, as after a broken stream or a restarted Orchestrate)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import grpc

from fuzzball_core.api.v1 import node_pb2, node_pb2_grpc
from fuzzball_core.config import parse_config
from fuzzball_core.plugins import get_registry
from fuzzball_core.substrate.agent import Agent

WORKFLOW = "0b7f3c1e-5d2a-4f6b-8e9d-2c1a0f3b4d5e"
NODE_ID = "node-id-1"


class ScriptedOrchestrate(node_pb2_grpc.NodeAgentServicer):
    """Registers any node; on Connect sends ``welcome``, then whatever the test queues."""

    def __init__(self, welcome: node_pb2.Welcome | None = None) -> None:
        self.welcome = welcome or node_pb2.Welcome(lease_seconds=3.0)
        #: what the agent sent, in order; ``streams[i]`` what it sent on its i-th stream
        self.received: list[node_pb2.NodeMessage] = []
        self.streams: list[list[node_pb2.NodeMessage]] = []
        #: the kinds of the messages each stream write carried (a batch's, in order)
        self.writes: list[list[str]] = []
        self.controls: asyncio.Queue[node_pb2.ControlMessage | None] = asyncio.Queue()
        self.connected = asyncio.Event()
        #: the agent ended its request stream itself (a half-close, not a cancellation)
        self.half_closed = asyncio.Event()
        self._arrived = asyncio.Event()

    async def Register(
        self, request: node_pb2.RegisterRequest, context: grpc.aio.ServicerContext
    ) -> node_pb2.RegisterResponse:
        return node_pb2.RegisterResponse(node_id=NODE_ID, lease_seconds=3.0)

    async def Connect(
        self,
        request_iterator: AsyncIterator[node_pb2.NodeMessage],
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[node_pb2.ControlMessage]:
        stream: list[node_pb2.NodeMessage] = []
        self.streams.append(stream)
        reader = asyncio.create_task(self._read(request_iterator, stream))
        self.connected.set()
        yield node_pb2.ControlMessage(welcome=self.welcome)
        while True:
            control = asyncio.create_task(self.controls.get())
            await asyncio.wait({control, reader}, return_when=asyncio.FIRST_COMPLETED)
            if not control.done():
                control.cancel()
                return  # the node ended its side: end ours, as Orchestrate does
            message = control.result()
            if message is None:
                reader.cancel()
                return  # hung up by the test
            yield message

    async def _read(
        self, request_iterator: AsyncIterator[node_pb2.NodeMessage], stream: list
    ) -> None:
        async for message in request_iterator:
            carried = message.batch.messages if message.HasField("batch") else [message]
            self.writes.append([str(each.WhichOneof("kind")) for each in carried])
            for each in carried:
                stream.append(each)
                self.received.append(each)
            self._arrived.set()
        self.half_closed.set()

    def send(self, **control: Any) -> None:
        self.controls.put_nowait(node_pb2.ControlMessage(**control))

    def hang_up(self) -> None:
        """End the current stream from Orchestrate's side."""
        self.controls.put_nowait(None)

    def exits(self) -> dict[int, node_pb2.RunExited]:
        return {m.exited.run_id: m.exited for m in self.received if m.HasField("exited")}

    async def wait_for(self, what: str, condition: Callable[[], bool], timeout: float = 30) -> None:
        async def until() -> None:
            while not condition():
                self._arrived.clear()
                await self._arrived.wait()

        try:
            await asyncio.wait_for(until(), timeout)
        except TimeoutError:
            raise AssertionError(f"the agent never sent {what}: {self.received}") from None


def scripted_agent(
    tmp_path: Path, port: int, images: dict[str, object] | None = None, name: str = "node"
) -> Agent:
    """A real agent of a node named ``name`` that connects to the scripted Orchestrate."""
    config = parse_config(
        {
            "data-dir": str(tmp_path / "data"),
            "tls": {"plaintext": True},
            "substrate": {
                "orchestrate-address": f"127.0.0.1:{port}",
                "node-token": "token",
                "node-name": name,
                "work-dir": str(tmp_path / "node"),
                "cores": 2,
                "memory": "1GiB",
            },
            **({"images": images} if images is not None else {}),
        }
    )
    return Agent(config, get_registry())


def assignment(run_id: int, command: list[str]) -> node_pb2.Assignment:
    """Run ``command`` in alpine as run ``run_id`` of a one-node job."""
    job = {"image": {"uri": "docker://alpine:latest"}, "command": command}
    return node_pb2.Assignment(
        run_id=run_id,
        workflow_id=WORKFLOW,
        stage_name="jobs.work",
        job_json=json.dumps(job),
        node_ids=[NODE_ID],
    )


async def serve(orchestrate: ScriptedOrchestrate) -> tuple[grpc.aio.Server, int]:
    """Serve the scripted Orchestrate on a loopback port."""
    server = grpc.aio.server()
    node_pb2_grpc.add_NodeAgentServicer_to_server(orchestrate, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, port


@contextlib.asynccontextmanager
async def agent_running(agent: Agent, server: grpc.aio.Server) -> AsyncIterator[asyncio.Task[None]]:
    """Run ``agent`` (its task is what the block gets) until the block ends; then stop it
    and the scripted Orchestrate's ``server``."""
    stop = asyncio.Event()
    running = asyncio.create_task(agent.run(stop))
    try:
        yield running
    finally:
        stop.set()
        await running
        await server.stop(grace=None)
