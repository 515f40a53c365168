"""Heartbeats scaled to the cluster (issue 19): the Welcome names each node's lease and
heartbeat interval, lengthened once the cluster's heartbeats would pass
``nodes.HEARTBEATS_PER_SECOND``; connected nodes are told again as the cluster grows; any
message from a node renews its lease, so a busy node need send no heartbeat."""

from __future__ import annotations

import asyncio
import time

import pytest

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.orchestrate import nodes
from fuzzball_core.substrate.agent import Outbox
from tests.orchestrate.conftest import Harness


def connect(harness: Harness, name: str) -> tuple[str, node_pb2.Welcome]:
    """Register a node and say its Hello, as the node API does; return its id and Welcome."""
    node_id = harness.node(name)
    unwanted = harness.engine.node_hello(node_id, [])
    return node_id, nodes.welcome(harness.engine.context, node_id, unwanted)


def test_a_small_cluster_keeps_the_configured_lease_and_a_third_of_it(harness):
    _, welcome = connect(harness, "n1")
    assert welcome.lease_seconds == 15
    assert welcome.heartbeat_seconds == 5
    assert welcome.accepts_batches


def test_a_large_cluster_lengthens_the_lease_to_three_intervals_with_room_to_grow(
    harness, monkeypatch
):
    # 2 nodes grown by RETUNE_GROWTH (2.5) at 0.25 a second: 10 s each
    monkeypatch.setattr(nodes, "HEARTBEATS_PER_SECOND", 0.25)
    connect(harness, "n1")
    _, welcome = connect(harness, "n2")
    assert welcome.heartbeat_seconds == pytest.approx(10)
    assert welcome.lease_seconds == pytest.approx(30)


def test_a_lengthened_lease_holds_the_node_until_it_ends(harness, monkeypatch):
    monkeypatch.setattr(nodes, "HEARTBEATS_PER_SECOND", 0.25)
    connect(harness, "n1")
    node_id, welcome = connect(harness, "n2")
    harness.report(node_id, heartbeat=node_pb2.Heartbeat())
    harness.clock.now += welcome.lease_seconds - 1  # past the configured 15 s
    harness.engine.step()
    assert harness.service.get_node(harness.admin, node_id).status == "READY"
    harness.clock.now += 2
    harness.engine.step()
    assert harness.service.get_node(harness.admin, node_id).status == "OFFLINE"


def test_a_node_of_a_large_cluster_keeps_its_lease_between_its_register_and_its_hello(
    harness, monkeypatch
):
    # thousands of nodes joining at once: a node's Connect waits behind the others' calls
    monkeypatch.setattr(nodes, "HEARTBEATS_PER_SECOND", 0.25)
    connect(harness, "n1")
    node_id = harness.node("n2")  # registered; its Hello not yet applied
    harness.clock.now += 20  # past the configured 15 s, within the cluster's 30 s
    harness.engine.step()
    assert harness.service.get_node(harness.admin, node_id).status == "READY"


def test_connected_nodes_are_told_the_longer_lease_as_the_cluster_grows(harness, monkeypatch):
    monkeypatch.setattr(nodes, "HEARTBEATS_PER_SECOND", 0.25)
    first, first_welcome = connect(harness, "n1")
    assert first_welcome.heartbeat_seconds == 5  # alone: the configured interval
    harness.sent("welcome")
    # a cluster twice the size of the one that fits 5 s at 0.25 a second (1.25 nodes)
    for index in range(2, 5):
        connect(harness, f"n{index}")
    retold = {node_id: m.welcome for node_id, m in harness.sent("welcome")}
    assert first in retold
    assert retold[first].lease_seconds == nodes.lease_of(harness.engine.context, first)
    assert retold[first].heartbeat_seconds == retold[first].lease_seconds / 3
    assert retold[first].lease_seconds > 15
    assert not retold[first].unknown_run_ids  # not a reconnect: nothing to drop


def test_a_node_told_a_longer_interval_is_held_to_it_from_its_last_message(harness, monkeypatch):
    # a cluster joining fast more than doubles the interval within one of a node's
    # intervals; the agent, told the longer one, skips its next turn's heartbeat (its last
    # message is within half the new interval: Outbox.heartbeat) and sends a whole new
    # interval later, past the old lease its last message bought
    monkeypatch.setattr(nodes, "HEARTBEATS_PER_SECOND", 0.5)
    first, welcome = connect(harness, "n1")
    assert welcome.heartbeat_seconds == 5
    harness.report(first, heartbeat=node_pb2.Heartbeat())  # its last message
    harness.sent("welcome")
    for index in range(2, 6):
        harness.node(f"n{index}")  # registered; their Hellos still to come
    connect(harness, "n6")  # a cluster of 6: 15 s at 0.5 heartbeats a second
    retold = {node_id: m.welcome for node_id, m in harness.sent("welcome")}[first]
    assert retold.heartbeat_seconds == pytest.approx(15)
    # the agent's turn at 5 s sends nothing (5 s since its last message, under half of
    # 15 s); its next turn is at 20 s
    outbox = Outbox()
    outbox.last_taken = time.monotonic() - 5
    assert not outbox.heartbeat(retold.heartbeat_seconds)
    harness.clock.now += 5 + retold.heartbeat_seconds - 1
    harness.engine.step()
    assert harness.service.get_node(harness.admin, first).status == "READY"
    # silent for the lease it was told, from its last message: lost
    harness.clock.now += retold.lease_seconds - (5 + retold.heartbeat_seconds - 1) + 1
    harness.engine.step()
    assert harness.service.get_node(harness.admin, first).status == "OFFLINE"


def test_the_cluster_is_not_retold_for_every_node_that_joins(harness, monkeypatch):
    monkeypatch.setattr(nodes, "HEARTBEATS_PER_SECOND", 0.25)
    for index in range(1, 8):
        connect(harness, f"n{index}")
    assert harness.engine.context.tuned_heartbeat == pytest.approx(35)  # swept at 7 nodes
    harness.sent("welcome")
    connect(harness, "n8")  # 40 s: under RETUNE_GROWTH times 35 s
    assert harness.sent("welcome") == []
    connect(harness, "n9")  # 45 s: past it
    assert len(harness.sent("welcome")) == 8


def test_the_clusters_heartbeats_stay_within_the_budget_while_it_grows(harness, monkeypatch):
    monkeypatch.setattr(nodes, "HEARTBEATS_PER_SECOND", 1.0)
    ctx = harness.engine.context
    for index in range(1, 41):
        connect(harness, f"n{index}")
        per_second = sum(3 / nodes.lease_of(ctx, node_id) for node_id in ctx.leases)
        assert per_second <= nodes.HEARTBEATS_PER_SECOND


def test_any_message_renews_a_ready_nodes_lease(harness):
    node_id, _ = connect(harness, "n1")
    harness.clock.now += 10
    harness.report(node_id, log=node_pb2.LogData(run_id=999, stream="stdout", data=b"x"))
    harness.clock.now += 10  # 20 s after the Hello, 10 after the log line
    harness.engine.step()
    assert harness.service.get_node(harness.admin, node_id).status == "READY"


def test_a_reconnecting_node_is_told_the_lease_of_the_cluster_as_it_is_now(harness, monkeypatch):
    monkeypatch.setattr(nodes, "HEARTBEATS_PER_SECOND", 0.25)
    connect(harness, "n1")
    _, long = connect(harness, "n2")
    assert long.lease_seconds > 15
    monkeypatch.setattr(nodes, "HEARTBEATS_PER_SECOND", 1000.0)
    _, again = connect(harness, "n2")
    assert again.lease_seconds == 15


def test_the_outbox_heartbeats_every_turn_for_an_orchestrate_naming_no_interval():
    outbox = Outbox()
    outbox.last_taken = float("inf")  # busy this instant
    assert outbox.heartbeat(0.0)


def test_the_outbox_sends_no_heartbeat_while_the_stream_is_busy():
    outbox = Outbox()
    assert outbox.heartbeat(5.0)  # quiet so far
    asyncio.run(outbox.take(lambda: True))  # the stream took it: the lease renewed just now
    assert not outbox.heartbeat(5.0)
    outbox.last_taken -= 2.5  # half an interval ago
    assert outbox.heartbeat(5.0)
