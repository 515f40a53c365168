"""The real Orchestrate service layer (SQLite store + engine) with a scripted node, for tests.

``SqlStack`` builds ``SqlOrchestrateService`` the way its docstring says, runs the engine on
the background loop, and registers nodes that speak the node protocol through the engine's
NodeHub: a scripted node records the assignments it is sent, and a test tells it what the
job does (``emit_log``, ``set_stage``). Every call is made on the loop's thread, as Orchestrate
makes them; methods wait until the engine has applied what they sent.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.orchestrate.engine import Engine
from fuzzball_core.orchestrate.node_hub import NodeHub
from fuzzball_core.orchestrate.service import SqlOrchestrateService
from fuzzball_core.scheduling import Resources
from fuzzball_core.service.views import (
    CANCELED,
    FAILED,
    FINISHED,
    PENDING,
    STARTED,
    NodeView,
    Principal,
    StageView,
)
from fuzzball_core.store.database import connect, migrate, session_factory
from fuzzball_plugins.schedulers.default import DefaultScheduler
from support.live_api import LoopThread

T = TypeVar("T")
RunKey = tuple[str, str, "int | None"]

#: Who the stack itself reads as (an admin sees every account's workflows).
ADMIN = Principal("stack", "stack", is_admin=True)


class SqlStack:
    """The SQL service on ``loop``; its Protocol methods are proxied onto the loop's thread."""

    def __init__(self, loop: LoopThread, database: Path) -> None:
        self._loop = loop
        self._database = connect(f"sqlite:///{database}")
        migrate(self._database)
        sessions = session_factory(self._database)
        self.hub = NodeHub()
        # The scripted nodes send no heartbeats: their leases outlast any test on a loaded
        # machine unless a test asks for a short one (add_node's lease_seconds).
        self.engine = Engine(sessions, DefaultScheduler(), self.hub, lease_seconds=600.0)
        self.service = SqlOrchestrateService(sessions, self.engine)
        self._runs: dict[RunKey, int] = {}
        self._node_ids: list[str] = []
        #: run id -> the node it was assigned to (a report comes from its run's node)
        self._run_nodes: dict[int, str] = {}
        self._node_tasks: list[asyncio.Future[None]] = []
        self._engine_task = self._on_loop(lambda: asyncio.ensure_future(self.engine.run(tick=0.05)))

    def _on_loop(self, call: Callable[[], T]) -> T:
        async def run() -> T:
            return call()

        return self._loop.run(run())

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.service, name)
        return lambda *args, **kwargs: self._on_loop(lambda: method(*args, **kwargs))

    def close(self) -> None:
        """Stop the engine, close the node streams, then the store's connections (a test
        process runs thousands of stacks: each left open holds three descriptors)."""

        async def stop() -> None:
            self._engine_task.cancel()
            await asyncio.wait([self._engine_task], timeout=30)
            self.hub.close_all()

        self._loop.run(stop())
        self._database.dispose()

    # -- the scripted node --------------------------------------------------------------------

    def add_node(
        self,
        name: str,
        cores: int,
        memory: int,
        *,
        devices: dict[str, int] | None = None,
        annotations: dict[str, str] | None = None,
        lease_seconds: float | None = None,
    ) -> NodeView:
        """Register a node and start answering its stream's control messages.

        The scripted node sends no heartbeats: with a short ``lease_seconds`` it goes offline
        as soon as that lease runs out (see :meth:`wait_for_node_status`).
        """

        def register() -> str:
            usual = self.engine.lease_seconds
            self.engine.lease_seconds = lease_seconds if lease_seconds is not None else usual
            try:
                node_id = self.engine.register_node(
                    name, Resources(cores, memory, devices or {}), dict(annotations or {})
                )
            finally:
                self.engine.lease_seconds = usual
            queue = self.hub.attach(node_id)
            self._node_tasks.append(asyncio.ensure_future(self._serve(node_id, queue)))
            return node_id

        node_id = self._on_loop(register)
        self._node_ids.append(node_id)
        return self._on_loop(lambda: self.service.get_node(ADMIN, node_id))

    def wait_for_node_status(self, name: str, status: str) -> NodeView:
        """Wait until the engine shows the node with ``status`` (OFFLINE, DEPROVISIONED, ...)."""
        deadline = time.monotonic() + 10
        while (node := self._on_loop(lambda: self.service.get_node(ADMIN, name))).status != status:
            if time.monotonic() > deadline:
                raise AssertionError(f"node {name} is {node.status}, never became {status}")
            time.sleep(0.02)
        return node

    async def _serve(self, node_id: str, queue: asyncio.Queue[Any]) -> None:
        while (message := await queue.get()) is not None:
            kind = message.WhichOneof("kind")
            if kind == "assign":
                assign = message.assign
                task = assign.task_id if assign.has_task else None
                self._runs[(assign.workflow_id, assign.stage_name, task)] = assign.run_id
                self._run_nodes[assign.run_id] = node_id
            elif kind == "cancel":
                exited = node_pb2.RunExited(
                    run_id=message.cancel.run_id, exit_code=-1, canceled=True, time=time.time()
                )
                self.engine.node_message(node_id, node_pb2.NodeMessage(exited=exited))

    def _run_id(self, workflow_id: str, stage_name: str, task_id: int | None) -> int:
        deadline = time.monotonic() + 10
        while (workflow_id, stage_name, task_id) not in self._runs:
            if time.monotonic() > deadline:
                raise AssertionError(f"{stage_name} task {task_id} was never assigned")
            time.sleep(0.01)
        return self._runs[(workflow_id, stage_name, task_id)]

    def _send(self, *node_messages: node_pb2.NodeMessage) -> None:
        """Each report as its run's node sends it (Orchestrate applies a node's reports only
        about its own runs)."""
        self._on_loop(
            lambda: [self.engine.node_message(self._node_of(m), m) for m in node_messages]
        )

    def _node_of(self, message: node_pb2.NodeMessage) -> str:
        report = getattr(message, message.WhichOneof("kind") or "", None)
        run_id = getattr(report, "run_id", None)
        return self._run_nodes.get(run_id, self._node_ids[0]) if run_id else self._node_ids[0]

    def _settle(self, done: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 10
        while not self._on_loop(done):
            if time.monotonic() > deadline:
                raise AssertionError("the engine did not apply the node's report in time")
            time.sleep(0.01)

    def emit_log(
        self,
        workflow_id: str,
        stage_name: str,
        data: str,
        *,
        stream: str = "stdout",
        task_id: int | None = None,
    ) -> None:
        """The node reports output of the stage's run (the run is started first if need be)."""
        self.emit_logs(workflow_id, stage_name, [data], stream=stream, task_id=task_id)

    def emit_logs(
        self,
        workflow_id: str,
        stage_name: str,
        pieces: list[str],
        *,
        stream: str = "stdout",
        task_id: int | None = None,
    ) -> None:
        """The node reports each of ``pieces`` as one chunk of output of the stage's run, all
        at once (the run is started first if need be); waits until the last is stored."""
        run_id = self._run_id(workflow_id, stage_name, task_id)
        self._send(
            node_pb2.NodeMessage(started=node_pb2.RunStarted(run_id=run_id, time=time.time()))
        )
        before = self._on_loop(lambda: self._last_chunk(workflow_id))
        reports = [
            node_pb2.NodeMessage(
                log=node_pb2.LogData(run_id=run_id, stream=stream, data=piece.encode())
            )
            for piece in pieces
        ]
        self._send(*reports)

        def stored() -> bool:
            last = self._last_chunk(workflow_id)
            return last is not None and last != before and last.data == pieces[-1]

        self._settle(stored)

    def _last_chunk(self, workflow_id: str) -> Any:
        chunks = self.service.read_logs(ADMIN, workflow_id, tail=1)
        return chunks[-1] if chunks else None

    def set_stage(
        self,
        workflow_id: str,
        stage_name: str,
        status: str,
        *,
        exit_code: int | None = None,
        task_id: int | None = None,
        metering: dict[str, int] | None = None,
    ) -> None:
        """The node reports the run started (STARTED) or ended (FINISHED/FAILED/CANCELED),
        with the traffic its meters counted when ``metering`` is given. For a task of an
        array, FINISHED and FAILED wait for the task to be counted, not for the stage."""
        run_id = self._run_id(workflow_id, stage_name, task_id)
        ended_tasks = self._on_loop(lambda: self._ended_tasks(workflow_id, stage_name))
        self._send(
            node_pb2.NodeMessage(started=node_pb2.RunStarted(run_id=run_id, time=time.time()))
        )
        if status in (FINISHED, FAILED, CANCELED):
            exited = node_pb2.RunExited(
                run_id=run_id,
                time=time.time(),
                exit_code=exit_code or 0,
                canceled=status == CANCELED,
                metering_json=json.dumps(metering) if metering else "",
            )
            self._send(node_pb2.NodeMessage(exited=exited))

        def applied() -> bool:
            if task_id is not None and status in (FINISHED, FAILED):
                return self._ended_tasks(workflow_id, stage_name) > ended_tasks
            stage = self._stage(workflow_id, stage_name)
            return stage.status == status or (status == STARTED and stage.status != PENDING)

        self._settle(applied)

    def _stage(self, workflow_id: str, stage_name: str) -> StageView:
        workflow = self.service.get_workflow(ADMIN, workflow_id)
        return next(s for s in workflow.stages if s.name == stage_name)

    def _ended_tasks(self, workflow_id: str, stage_name: str) -> int:
        stage = self._stage(workflow_id, stage_name)
        return stage.tasks_finished + stage.tasks_failed
