"""The agent told ``Shutdown`` (its node was deprovisioned): it takes no more work, stops what
is still running, reports it, closes its stream cleanly and returns.

Orchestrate here is a scripted ``NodeAgent`` server on loopback: the test decides what it
sends down the stream and reads what the real agent sends up.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from fuzzball_core.api.v1 import node_pb2, node_pb2_grpc
from fuzzball_core.config import parse_config
from fuzzball_core.plugins import get_registry
from fuzzball_core.substrate.agent import Agent

pytestmark = pytest.mark.root

REASON = "deprovisioned: the node is empty"
WORKFLOW = "0b7f3c1e-5d2a-4f6b-8e9d-2c1a0f3b4d5e"


class ScriptedOrchestrate(node_pb2_grpc.NodeAgentServicer):
    """Registers any node; on Connect sends a Welcome, then whatever the test queues."""

    def __init__(self) -> None:
        self.received: list[node_pb2.NodeMessage] = []
        self.controls: asyncio.Queue[node_pb2.ControlMessage] = asyncio.Queue()
        self.connected = asyncio.Event()
        #: the agent ended its request stream itself (a half-close, not a cancellation)
        self.half_closed = asyncio.Event()
        self._arrived = asyncio.Event()

    async def Register(
        self, request: node_pb2.RegisterRequest, context: grpc.aio.ServicerContext
    ) -> node_pb2.RegisterResponse:
        return node_pb2.RegisterResponse(node_id="node-id-1", lease_seconds=3.0)

    async def Connect(
        self,
        request_iterator: AsyncIterator[node_pb2.NodeMessage],
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[node_pb2.ControlMessage]:
        reader = asyncio.create_task(self._read(request_iterator))
        self.connected.set()
        yield node_pb2.ControlMessage(welcome=node_pb2.Welcome(lease_seconds=3.0))
        while True:
            control = asyncio.create_task(self.controls.get())
            await asyncio.wait({control, reader}, return_when=asyncio.FIRST_COMPLETED)
            if not control.done():
                control.cancel()
                return  # the node ended its side: end ours, as Orchestrate does
            yield control.result()

    async def _read(self, request_iterator: AsyncIterator[node_pb2.NodeMessage]) -> None:
        async for message in request_iterator:
            self.received.append(message)
            self._arrived.set()
        self.half_closed.set()

    def send(self, **control: Any) -> None:
        self.controls.put_nowait(node_pb2.ControlMessage(**control))

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


def _agent(tmp_path: Path, port: int, images: dict[str, object] | None = None) -> Agent:
    config = parse_config(
        {
            "data-dir": str(tmp_path / "data"),
            "tls": {"plaintext": True},
            "substrate": {
                "orchestrate-address": f"127.0.0.1:{port}",
                "node-token": "token",
                "node-name": "leaving-node",
                "work-dir": str(tmp_path / "node"),
                "cores": 2,
                "memory": "1GiB",
            },
            **({"images": images} if images is not None else {}),
        }
    )
    return Agent(config, get_registry())


def _assignment(run_id: int, command: list[str]) -> node_pb2.Assignment:
    job = {"image": {"uri": "docker://alpine:latest"}, "command": command}
    return node_pb2.Assignment(
        run_id=run_id,
        workflow_id=WORKFLOW,
        stage_name="jobs.work",
        job_json=json.dumps(job),
        node_ids=["node-id-1"],
    )


async def _serve(orchestrate: ScriptedOrchestrate) -> tuple[grpc.aio.Server, int]:
    server = grpc.aio.server()
    node_pb2_grpc.add_NodeAgentServicer_to_server(orchestrate, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, port


def test_shutdown_makes_the_agent_close_its_stream_and_return_saying_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> tuple[Agent, ScriptedOrchestrate]:
        orchestrate = ScriptedOrchestrate()
        server, port = await _serve(orchestrate)
        agent = _agent(tmp_path, port)
        stop = asyncio.Event()
        running = asyncio.create_task(agent.run(stop))
        try:
            await asyncio.wait_for(orchestrate.connected.wait(), 30)
            orchestrate.send(shutdown=node_pb2.Shutdown(reason=REASON))
            await asyncio.wait_for(asyncio.shield(running), 30)
        finally:
            stop.set()
            await running
            await server.stop(grace=None)
        return agent, orchestrate

    with caplog.at_level(logging.INFO, logger="fuzzball.substrate"):
        agent, orchestrate = asyncio.run(scenario())

    assert agent.deprovisioned == REASON
    assert orchestrate.half_closed.is_set()
    assert f"node leaving-node was deprovisioned by Orchestrate ({REASON})" in caplog.text
    assert "reconnecting" not in caplog.text


def test_after_shutdown_running_work_is_stopped_and_reported_and_new_work_refused(
    tmp_path: Path, images_config: dict[str, object]
) -> None:
    async def scenario() -> ScriptedOrchestrate:
        orchestrate = ScriptedOrchestrate()
        server, port = await _serve(orchestrate)
        agent = _agent(tmp_path, port, images_config)
        stop = asyncio.Event()
        running = asyncio.create_task(agent.run(stop))
        try:
            await asyncio.wait_for(orchestrate.connected.wait(), 30)
            orchestrate.send(assign=_assignment(7, ["/bin/sh", "-c", "sleep 600"]))
            await orchestrate.wait_for(
                "run 7's start",
                lambda: any(m.started.run_id == 7 for m in orchestrate.received),
                timeout=60,
            )
            orchestrate.send(shutdown=node_pb2.Shutdown(reason=REASON))
            orchestrate.send(assign=_assignment(8, ["/bin/sh", "-c", "true"]))
            await asyncio.wait_for(asyncio.shield(running), 30)
        finally:
            stop.set()
            await running
            await server.stop(grace=None)
        return orchestrate

    orchestrate = asyncio.run(scenario())

    exits = orchestrate.exits()
    assert exits[7].canceled
    assert exits[8].message == "node leaving-node is being deprovisioned and takes no new work"
    assert not any(m.started.run_id == 8 for m in orchestrate.received)
    assert orchestrate.half_closed.is_set()
