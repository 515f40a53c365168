"""Fixtures for the store and engine tests: an engine driven pass by pass, over a real database
(``database_url``, from tests/conftest.py: SQLite, and PostgreSQL when there is a server)."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from sqlalchemy import event

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.orchestrate.engine import Engine
from fuzzball_core.orchestrate.node_hub import NodeHub
from fuzzball_core.orchestrate.service import SqlOrchestrateService
from fuzzball_core.scheduling import Resources, Scheduler
from fuzzball_core.service.views import Principal
from fuzzball_core.store.database import connect, migrate, session_factory
from fuzzball_plugins.schedulers.default import DefaultScheduler


class RecordingHub(NodeHub):
    """A hub whose every node is connected and whose messages are kept for the test."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple[str, node_pb2.ControlMessage]] = []

    def send(self, node_id: str, message: node_pb2.ControlMessage) -> bool:
        self.sent.append((node_id, message))
        return True

    def take(self, kind: str) -> list[tuple[str, node_pb2.ControlMessage]]:
        taken = [(n, m) for n, m in self.sent if m.WhichOneof("kind") == kind]
        self.sent = [(n, m) for n, m in self.sent if m.WhichOneof("kind") != kind]
        return taken


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Harness:
    """An engine and its service over a real database, with the node side played by hand."""

    engine: Engine
    service: SqlOrchestrateService
    hub: RecordingHub
    clock: FakeClock
    user: Principal
    admin: Principal

    def node(self, name: str = "n1", cores: int = 4, memory: int = 8 << 30, **devices: int) -> str:
        return self.engine.register_node(name, Resources(cores, memory, devices), {})

    def submit(self, text: str) -> str:
        workflow_id = self.service.start_workflow(self.user, raw_specification=text, name="wf")
        self.engine.step()
        return workflow_id

    def assignments(self) -> list[node_pb2.Assignment]:
        return [m.assign for _, m in self.hub.take("assign")]

    def sent(self, kind: str) -> list[tuple[str, node_pb2.ControlMessage]]:
        """(node id, message) of every ``kind`` message sent since the last look."""
        return self.hub.take(kind)

    def report(self, node_id: str, **fields) -> None:
        self.engine.node_message(node_id, node_pb2.NodeMessage(**fields))

    def start(self, node_id: str, run_id: int) -> None:
        self.report(node_id, started=node_pb2.RunStarted(run_id=run_id))

    def exit(self, node_id: str, run_id: int, code: int = 0, **extra) -> None:
        self.report(node_id, exited=node_pb2.RunExited(run_id=run_id, exit_code=code, **extra))

    def started(self, text: str) -> tuple[str, str, node_pb2.Assignment]:
        """``text`` submitted to a fresh node, its first assignment started there and the
        start's pass stepped: (node id, workflow id, the assignment)."""
        node = self.node()
        workflow_id = self.submit(text)
        (assignment,) = self.assignments()
        self.start(node, assignment.run_id)
        self.engine.step()
        return node, workflow_id, assignment

    def run_to_end(self, node_id: str, assignment: node_pb2.Assignment, code: int = 0) -> None:
        self.start(node_id, assignment.run_id)
        self.exit(node_id, assignment.run_id, code)
        self.engine.step()

    def stages(self, workflow_id: str) -> dict[str, str]:
        view = self.service.get_workflow(self.user, workflow_id)
        return {stage.name: stage.status for stage in view.stages}

    def status(self, workflow_id: str) -> str:
        return self.service.get_workflow(self.user, workflow_id).status

    def events(self, workflow_id: str) -> list[str]:
        return [e.kind for e in self.service.list_events(self.user, workflow_id)]

    def restarted(self) -> Engine:
        """A new engine over the same database, as after Orchestrate was SIGKILLed."""
        engine = Engine(
            self.engine.sessions, DefaultScheduler(), self.hub, lease_seconds=15, clock=self.clock
        )
        engine.recover()
        return engine


def build_harness(
    url: str, clock: FakeClock | None = None, scheduler: Scheduler | None = None
) -> Harness:
    database = connect(url)
    migrate(database)
    sessions = session_factory(database)
    hub = RecordingHub()
    clock = clock or FakeClock()
    engine = Engine(sessions, scheduler or DefaultScheduler(), hub, lease_seconds=15, clock=clock)
    service = SqlOrchestrateService(sessions, engine)
    user, _ = service.create_account(f"user-{uuid.uuid4().hex[:6]}")
    admin, _ = service.create_account(f"admin-{uuid.uuid4().hex[:6]}", admin=True)
    return Harness(engine, service, hub, clock, user, admin)


@pytest.fixture
def harness(database_url) -> Harness:
    return build_harness(database_url)


@pytest.fixture
def harness_with(database_url) -> Callable[..., Harness]:
    """Harnesses over the test database made by the test, with a scheduler of its own
    (``harness_with(scheduler=...)``): a test module asks for this fixture rather than
    importing ``conftest``, a name another folder's conftest may hold when pytest is
    given several folders."""
    return functools.partial(build_harness, database_url)


@pytest.fixture
def build():
    """``build(url)``: a harness over the database at ``url`` (a store the test placed)."""
    return build_harness


@pytest.fixture
def statements(harness):
    """The SQL statements the harness's database runs, as they run."""
    bind = harness.engine.sessions.kw["bind"]
    seen: list[str] = []

    def record(_conn, _cursor, statement, *_args) -> None:
        seen.append(statement)

    event.listen(bind, "before_cursor_execute", record)
    yield seen
    event.remove(bind, "before_cursor_execute", record)
