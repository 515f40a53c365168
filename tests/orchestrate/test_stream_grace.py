"""A closed stream's grace: a node whose Connect stream ended, with no newer stream replacing
it and not by Orchestrate's own shutdown, is lost once ``nodes.stream_grace`` has passed
unless it says Hello again, however long its lease; one back in time keeps its runs and its
whole lease, and its ``last_seen`` stays when it was last heard."""

from __future__ import annotations

import pytest
from support.engine_workflows import HELLO

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.orchestrate import nodes
from fuzzball_core.orchestrate.node_api import NodeAgentServicer
from fuzzball_core.orchestrate.node_hub import NodeQueue
from tests.orchestrate.conftest import Harness


@pytest.fixture
def long_leases(monkeypatch) -> None:
    """A heartbeat budget so small that a single node's lease is 75 s (25 s intervals), five
    times the configured 15 s: the grace is then shorter than any lease."""
    monkeypatch.setattr(nodes, "HEARTBEATS_PER_SECOND", 0.05)


def on_stream(harness: Harness) -> tuple[str, str, int, NodeQueue]:
    """A node running HELLO's job, on a stream that said Hello: (node id, workflow id, run
    id, the stream's queue)."""
    node_id, workflow_id, assignment = harness.started(HELLO)
    queue = harness.hub.attach(node_id)
    harness.engine.node_hello(node_id, [assignment.run_id])
    assert nodes.lease_of(harness.engine.context, node_id) == 75
    return node_id, workflow_id, assignment.run_id, queue


def end_stream(harness: Harness, node_id: str, queue: NodeQueue) -> None:
    """The stream of ``queue`` ends, as the node API ends it (the node crashed, the network
    went)."""
    NodeAgentServicer(harness.engine, harness.hub, "token").stream_ended(node_id, queue)


def status(harness: Harness, node_id: str) -> str:
    return harness.service.get_node(harness.admin, node_id).status


def after(harness: Harness, seconds: float) -> None:
    harness.clock.now += seconds
    harness.engine.step()


@pytest.mark.usefixtures("long_leases")
def test_a_closed_streams_node_is_lost_after_the_grace_not_its_lease(harness):
    node_id, workflow_id, _, queue = on_stream(harness)
    end_stream(harness, node_id, queue)
    grace = nodes.stream_grace(harness.engine.context)
    assert grace == 15  # the configured lease
    after(harness, grace - 1)
    assert status(harness, node_id) == "READY"
    after(harness, 2)
    assert status(harness, node_id) == "OFFLINE"
    (stage,) = harness.service.get_workflow(harness.user, workflow_id).stages
    assert stage.status == "FAILED"
    assert "stopped responding" in stage.message  # as a lapsed lease's runs fail


@pytest.mark.usefixtures("long_leases")
def test_a_node_back_within_the_grace_keeps_its_runs_and_its_whole_lease(harness):
    node_id, workflow_id, run_id, queue = on_stream(harness)
    running = harness.stages(workflow_id)
    end_stream(harness, node_id, queue)
    after(harness, nodes.stream_grace(harness.engine.context) - 1)
    harness.hub.attach(node_id)
    assert harness.engine.node_hello(node_id, [run_id]) == []  # nothing for it to drop
    after(harness, 74)  # within the 75 s lease its Hello renewed
    assert status(harness, node_id) == "READY"
    assert harness.stages(workflow_id) == running
    after(harness, 2)
    assert status(harness, node_id) == "OFFLINE"  # silent since: its whole lease, no more


@pytest.mark.usefixtures("long_leases")
def test_a_node_whose_new_stream_waits_for_its_hello_is_not_lost_at_the_grace(harness):
    node_id, workflow_id, _, queue = on_stream(harness)
    running = harness.stages(workflow_id)
    end_stream(harness, node_id, queue)
    harness.hub.attach(node_id)  # reconnected; its Hello is behind other arrivals
    after(harness, nodes.stream_grace(harness.engine.context) + 1)
    assert status(harness, node_id) == "READY"
    assert harness.stages(workflow_id) == running


@pytest.mark.usefixtures("long_leases")
def test_a_node_that_registers_again_within_the_grace_keeps_its_runs(harness):
    node_id, workflow_id, _, queue = on_stream(harness)
    running = harness.stages(workflow_id)
    end_stream(harness, node_id, queue)
    after(harness, 1)
    assert harness.node() == node_id  # its Register, before it connects again
    after(harness, nodes.stream_grace(harness.engine.context))
    assert status(harness, node_id) == "READY"
    assert harness.stages(workflow_id) == running


@pytest.mark.usefixtures("long_leases")
def test_a_replaced_stream_does_not_cut_the_lease(harness):
    node_id, workflow_id, run_id, old = on_stream(harness)
    running = harness.stages(workflow_id)
    harness.hub.attach(node_id)  # the node reconnected before its old stream was seen to end
    harness.engine.node_hello(node_id, [run_id])
    end_stream(harness, node_id, old)
    after(harness, 74)
    assert status(harness, node_id) == "READY"
    assert harness.stages(workflow_id) == running


@pytest.mark.usefixtures("long_leases")
def test_orchestrates_shutdown_does_not_cut_leases(harness):
    node_id, _, _, queue = on_stream(harness)
    harness.hub.close_all()
    end_stream(harness, node_id, queue)  # each stream ends after close_all told it to
    after(harness, 74)
    assert status(harness, node_id) == "READY"


@pytest.mark.usefixtures("long_leases")
def test_a_closed_streams_node_shows_when_it_was_last_heard_before_and_after_it_is_lost(
    harness,
):
    node_id, _, _, queue = on_stream(harness)
    harness.clock.now += 10
    harness.report(node_id, heartbeat=node_pb2.Heartbeat())
    heard = harness.clock.now
    harness.clock.now += 2
    end_stream(harness, node_id, queue)
    for _ in range(10):  # passes writing lease rows (a third of a lease apart) meanwhile
        after(harness, 1)
    assert harness.service.get_node(harness.admin, node_id).last_seen == heard
    after(harness, nodes.stream_grace(harness.engine.context))
    view = harness.service.get_node(harness.admin, node_id)
    assert view.status == "OFFLINE"
    assert view.last_seen == heard  # from the lease in memory, not a row a lease behind


@pytest.mark.usefixtures("long_leases")
def test_no_grace_ends_while_other_nodes_whose_streams_closed_are_still_coming_back(harness):
    # a switch dropped both streams at once; the first node's Register is served near the
    # end of the grace (thousands of others ahead of it), the second's is still queued
    first, _, _, first_queue = on_stream(harness)
    second = harness.node("n2")
    second_queue = harness.hub.attach(second)
    harness.engine.node_hello(second, [])
    end_stream(harness, first, first_queue)
    end_stream(harness, second, second_queue)
    grace = nodes.stream_grace(harness.engine.context)
    after(harness, grace - 1)
    assert harness.node() == first  # its Register, served at last
    after(harness, grace - 1)  # past the second's grace, within a grace of the first's return
    assert status(harness, second) == "READY"
    after(harness, 2)  # a whole grace with nobody back: the wave is over
    assert status(harness, second) == "OFFLINE"
    assert status(harness, first) == "READY"


@pytest.mark.usefixtures("long_leases")
def test_a_wave_of_closed_streams_past_the_disruption_threshold_keeps_every_lease(
    harness, monkeypatch
):
    # a switch dropped both nodes' streams at once and their Registers are queued past the
    # grace: as a disruption (two nodes here), neither is lost at the grace, only at its lease
    monkeypatch.setattr(nodes, "DISRUPTION_MINIMUM", 2)
    first, _, _, first_queue = on_stream(harness)
    second = harness.node("n2")
    second_queue = harness.hub.attach(second)
    harness.engine.node_hello(second, [])
    ctx = harness.engine.context
    lease = max(nodes.lease_of(ctx, first), nodes.lease_of(ctx, second))
    end_stream(harness, first, first_queue)
    end_stream(harness, second, second_queue)
    after(harness, nodes.stream_grace(ctx) + 5)
    assert (status(harness, first), status(harness, second)) == ("READY", "READY")
    after(harness, lease)  # their whole leases, without a word from either
    assert (status(harness, first), status(harness, second)) == ("OFFLINE", "OFFLINE")


@pytest.mark.usefixtures("long_leases")
def test_streams_closing_a_grace_apart_are_no_disruption(harness, monkeypatch):
    monkeypatch.setattr(nodes, "DISRUPTION_MINIMUM", 2)
    first, _, _, first_queue = on_stream(harness)
    second = harness.node("n2")
    second_queue = harness.hub.attach(second)
    harness.engine.node_hello(second, [])
    grace = nodes.stream_grace(harness.engine.context)
    end_stream(harness, first, first_queue)
    after(harness, grace + 1)
    end_stream(harness, second, second_queue)
    assert status(harness, first) == "OFFLINE"
    after(harness, grace + 1)
    assert status(harness, second) == "OFFLINE"


def test_a_disruptions_node_is_not_lost_at_its_lease_while_others_keep_coming_back(
    harness, monkeypatch
):
    # as a restart's wave: thousands of Registers queued behind one another outlast the
    # nodes' leases, and a node still waiting its turn keeps its runs while others return
    monkeypatch.setattr(nodes, "DISRUPTION_MINIMUM", 2)
    first, _, assignment = harness.started(HELLO)
    first_queue = harness.hub.attach(first)
    harness.engine.node_hello(first, [assignment.run_id])
    second = harness.node("n2")
    second_queue = harness.hub.attach(second)
    harness.engine.node_hello(second, [])
    ctx = harness.engine.context
    lease = nodes.lease_of(ctx, second)  # the configured lease: a grace is no shorter
    end_stream(harness, first, first_queue)
    end_stream(harness, second, second_queue)
    after(harness, lease - 1)
    assert harness.node() == first  # its Register, served at last
    after(harness, 5)  # past the second's lease, the wave still moving
    assert status(harness, second) == "READY"
    after(harness, nodes.RESTART_GRACE_LEASES * ctx.lease_seconds)  # nobody back since
    assert status(harness, second) == "OFFLINE"
