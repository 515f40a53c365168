"""A node whose Substrate is older than Orchestrate requires is cordoned with a provisioner
hold naming both versions (orchestrate/node_versions.py): no work is placed there, the
node's holds and events say why, and registering again with a Substrate new enough
releases it. A node with health.disabled is never held."""

from __future__ import annotations

import uuid
from pathlib import Path

import grpc
import pytest
from support.cluster import NODE_TOKEN, InProcessOrchestrate, free_port

from fuzzball_core import __version__
from fuzzball_core.api.v1 import node_pb2, node_pb2_grpc
from fuzzball_core.orchestrate.engine import Engine
from fuzzball_core.orchestrate.node_hub import NodeHub
from fuzzball_core.orchestrate.node_versions import MINIMUM_SUBSTRATE_VERSION, too_old
from fuzzball_core.orchestrate.service import SqlOrchestrateService
from fuzzball_core.scheduling import Resources
from fuzzball_core.store.database import connect, migrate, session_factory
from fuzzball_plugins.schedulers.default import DefaultScheduler

GIB = 1024**3
OLD = "0.0.9"

JOB = """\
version: v1
jobs:
  small:
    image: {uri: docker://alpine:latest}
    command: ["true"]
    resource: {cpu: {cores: 1}, memory: {size: 1GiB}}
"""


class Cluster:
    """An engine and its service over a database, nodes registered by hand."""

    def __init__(self, directory: Path) -> None:
        database = connect(f"sqlite:///{directory / 'orchestrate.db'}")
        migrate(database)
        sessions = session_factory(database)
        self.hub = RecordingHub()
        self.engine = Engine(sessions, DefaultScheduler(), self.hub, lease_seconds=15)
        self.service = SqlOrchestrateService(sessions, self.engine)
        self.admin = self.service.create_account(f"ops-{uuid.uuid4().hex[:6]}", admin=True)[0]

    def register(self, version: str, **options: bool) -> str:
        return self.engine.register_node(
            "node-1", Resources(4, 8 * GIB), {}, version=version, **options
        )

    def holds(self) -> list[tuple[str, str, str]]:
        (node,) = self.service.list_nodes(self.admin)
        return [(h.effect, h.source, h.reason) for h in node.holds]

    def event_messages(self, node_id: str) -> list[tuple[str, str]]:
        return [(e.kind, e.message) for e in self.service.list_node_events(self.admin, node_id)]


class RecordingHub(NodeHub):
    """Every node connected; what was sent is kept."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple[str, node_pb2.ControlMessage]] = []

    def send(self, node_id: str, message: node_pb2.ControlMessage) -> bool:
        self.sent.append((node_id, message))
        return True


@pytest.fixture
def cluster(tmp_path: Path) -> Cluster:
    return Cluster(tmp_path)


def test_the_minimum_is_this_releases_own_version():
    assert too_old(__version__) is None


def test_an_older_version_is_named_with_the_minimum():
    reason = too_old(OLD)
    assert reason is not None
    assert f"substrate {OLD} is older than {MINIMUM_SUBSTRATE_VERSION}" in reason


def test_a_newer_version_in_any_spelling_is_new_enough():
    assert too_old("v9.0") is None
    assert too_old("99.1.0-rc1") is None


def test_no_version_or_a_word_is_too_old():
    assert too_old("") is not None and "no version reported" in too_old("")
    assert too_old("unknown") is not None


def test_a_node_with_an_old_substrate_is_cordoned_naming_both_versions(cluster):
    cluster.register(OLD)
    ((effect, source, reason),) = cluster.holds()
    assert (effect, source) == ("cordon", "provisioner")
    assert OLD in reason and MINIMUM_SUBSTRATE_VERSION in reason


def test_the_nodes_events_say_why_it_is_held(cluster):
    node_id = cluster.register(OLD)
    held = [m for kind, m in cluster.event_messages(node_id) if kind == "node_hold_added"]
    assert len(held) == 1
    assert f"substrate {OLD} is older than {MINIMUM_SUBSTRATE_VERSION}" in held[0]


def test_no_work_is_placed_on_a_node_with_an_old_substrate(cluster):
    cluster.register(OLD)
    workflow = cluster.service.start_workflow(cluster.admin, raw_specification=JOB, name="wf")
    cluster.engine.step()
    assert [m for _, m in cluster.hub.sent if m.WhichOneof("kind") == "assign"] == []
    (stage,) = cluster.service.explain_workflow(cluster.admin, workflow)
    assert "cordon" in stage.message


def test_registering_again_with_a_new_enough_substrate_releases_the_hold(cluster):
    cluster.register(OLD)
    node_id = cluster.register(MINIMUM_SUBSTRATE_VERSION)
    assert cluster.holds() == []
    kinds = [kind for kind, _ in cluster.event_messages(node_id)]
    assert kinds.count("node_hold_released") == 1


def test_registering_again_with_the_same_old_substrate_keeps_one_hold(cluster):
    cluster.register(OLD)
    cluster.register(OLD)
    assert len(cluster.holds()) == 1


def test_a_node_with_health_disabled_is_never_held_and_the_event_says_so(cluster):
    node_id = cluster.register(OLD, health_disabled=True)
    assert cluster.holds() == []
    refused = [m for kind, m in cluster.event_messages(node_id) if kind == "node_hold_refused"]
    assert len(refused) == 1 and "health.disabled" in refused[0] and OLD in refused[0]


def test_an_admin_cordon_survives_the_upgrade(cluster):
    cluster.register(OLD)
    cluster.engine.add_hold("node-1", "cordon", "admin", "repairs", "ops")
    cluster.register(MINIMUM_SUBSTRATE_VERSION)
    assert cluster.holds() == [("cordon", "admin", "repairs")]


def test_the_node_api_passes_the_version_a_substrate_reports(tmp_path):
    grpc_listen = f"127.0.0.1:{free_port()}"
    orchestrate = InProcessOrchestrate(
        {
            "data-dir": str(tmp_path / "data"),
            "database": {"url": f"sqlite:///{tmp_path / 'orchestrate.db'}"},
            "orchestrate": {
                "grpc-listen": grpc_listen,
                "rest-listen": f"127.0.0.1:{free_port()}",
                "node-token": NODE_TOKEN,
            },
            "tls": {"plaintext": True},
        }
    )
    try:
        with grpc.insecure_channel(grpc_listen) as channel:
            node_pb2_grpc.NodeAgentStub(channel).Register(
                node_pb2.RegisterRequest(
                    name="old-node",
                    capacity=node_pb2.Resources(cores=4, memory=8 * GIB),
                    version=OLD,
                ),
                metadata=[("authorization", f"Bearer {NODE_TOKEN}")],
                timeout=30,
            )
        (node,) = orchestrate.nodes()
        ((hold),) = node.holds
        assert (hold.effect, hold.source) == ("cordon", "provisioner")
        assert OLD in hold.reason
    finally:
        orchestrate.close()
