"""What an idle pass does about leases (issue 19): it looks for lapsed leases only once the
first of them can have ended, and for lease rows to write once every third of a lease;
failure detection stays within the lease each node was told."""

from __future__ import annotations

from sqlalchemy import select

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.orchestrate import nodes
from fuzzball_core.store.models import Node
from tests.orchestrate.test_heartbeat_scaling import connect


def status(harness, node_id: str) -> str:
    return harness.service.get_node(harness.admin, node_id).status


def stored_lease(harness, node_id: str) -> float:
    with harness.engine.sessions() as session:
        return session.scalars(select(Node.lease_expires_at).where(Node.id == node_id)).one()


def heartbeat(harness, *node_ids: str) -> None:
    for node_id in node_ids:
        harness.report(node_id, heartbeat=node_pb2.Heartbeat())


def test_a_node_told_a_shorter_lease_than_the_others_lapses_when_its_own_lease_ends(
    harness, monkeypatch
):
    monkeypatch.setattr(nodes, "HEARTBEATS_PER_SECOND", 0.25)  # 2 nodes: 30 s leases
    first, _ = connect(harness, "n1")
    second, long_terms = connect(harness, "n2")
    assert long_terms.lease_seconds == 30
    harness.clock.now += 1
    heartbeat(harness, first, second)
    harness.engine.step()  # no lease ends for 30 s: the passes until then skip the scan
    monkeypatch.setattr(nodes, "HEARTBEATS_PER_SECOND", 1000.0)
    third, short_terms = connect(harness, "n3")
    assert short_terms.lease_seconds == 15
    for _ in range(16):
        harness.clock.now += 1
        heartbeat(harness, first, second)
        harness.engine.step()
    assert status(harness, third) == "OFFLINE"
    assert status(harness, first) == status(harness, second) == "READY"


def test_a_silent_node_lapses_in_the_first_pass_after_its_lease_however_long_the_skip(harness):
    quiet, _ = connect(harness, "quiet")
    busy, _ = connect(harness, "busy")
    for _ in range(15):
        harness.clock.now += 1
        heartbeat(harness, busy)
        harness.engine.step()
        assert status(harness, quiet) == "READY"
    harness.clock.now += 1
    harness.engine.step()
    assert status(harness, quiet) == "OFFLINE"
    assert status(harness, busy) == "READY"


def test_a_heartbeat_after_a_stall_keeps_its_node_for_a_lease_from_then(harness):
    node_id, _ = connect(harness, "n1")
    harness.engine.step()
    harness.engine.extend_leases(100)  # Orchestrate was held up: every lease pushed on
    harness.clock.now += 16
    harness.engine.step()  # the first lease left now ends 100 s on
    assert status(harness, node_id) == "READY"
    heartbeat(harness, node_id)  # earlier than the pushed lease: the node has 15 s from now
    harness.clock.now += 16
    harness.engine.step()
    assert status(harness, node_id) == "OFFLINE"


def test_a_heartbeating_nodes_row_follows_its_lease_within_a_lease_and_a_third(harness):
    node_id, _ = connect(harness, "n1")
    harness.engine.step()
    written = stored_lease(harness, node_id)
    lag = 15 * (1 + nodes.PERSIST_EVERY)
    for second in range(1, 61):
        harness.clock.now += 1
        if second % 5 == 0:
            heartbeat(harness, node_id)
        harness.engine.step()
        row = stored_lease(harness, node_id)
        assert harness.clock.now - (row - 15) <= lag + 5  # last heard at most 5 s before
        if row != written:
            assert row - written >= 15  # written once a lease behind, not every heartbeat
            written = row
    assert written > harness.clock.now  # the row holds a lease not ended
