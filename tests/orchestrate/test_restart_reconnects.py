"""Orchestrate restarted with work running on many nodes: the nodes come back one after
another (their Register and Hello queue on Orchestrate's one loop), and none loses its
lease, or its jobs, while it waits its turn; a node that never comes back still lapses."""

from __future__ import annotations

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.orchestrate.nodes import RESTART_GRACE_LEASES
from fuzzball_core.scheduling import Resources

ONE_CORE = """
version: v1
jobs:
  held:
    image: {uri: docker://alpine:latest}
    command: [sleep, "600"]
    resource: {cpu: {cores: 4}, memory: {size: 64MB}}
"""


def running_on_nodes(harness, names):
    """One workflow running on each node; {node name: (node id, workflow id, run id)}."""
    placed = {}
    ids = {name: harness.node(name) for name in names}
    for _ in names:
        workflow_id = harness.submit(ONE_CORE)
        (sent,) = harness.sent("assign")
        node_id, message = sent
        harness.start(node_id, message.assign.run_id)
        harness.engine.step()
        (name,) = [n for n, i in ids.items() if i == node_id]
        placed[name] = (node_id, workflow_id, message.assign.run_id)
    return placed


def come_back(engine, name, run_id):
    """The node's Register and Hello, as a returning Substrate sends them."""
    node_id = engine.register_node(name, Resources(4, 8 << 30, {}), {})
    assert engine.node_hello(node_id, [run_id]) == []
    return node_id


def heartbeat(engine, *node_ids):
    for node_id in node_ids:
        engine.node_message(node_id, node_pb2.NodeMessage(heartbeat=node_pb2.Heartbeat()))


def test_nodes_returning_after_a_restart_keep_their_jobs_while_the_others_return(harness):
    names = [f"n{i}" for i in range(8)]
    placed = running_on_nodes(harness, names)
    engine = harness.restarted()
    # each node's turn comes 10 s after the previous one's: the last returns 80 s after the
    # restart, past the one lease (15 s) the restart granted and past its grace (60 s)
    back = []
    for name in names:
        harness.clock.now += 10
        heartbeat(engine, *back)  # those back heartbeat as usual
        engine.step()
        back.append(come_back(engine, name, placed[name][2]))
    engine.step()
    for name in names:
        assert harness.stages(placed[name][1]) == {"jobs.held": "STARTED"}, name
    assert all(node.status == "READY" for node in harness.service.list_nodes(harness.admin))


def test_a_node_that_never_returns_lapses_a_lease_after_the_last_one_came_back(harness):
    placed = running_on_nodes(harness, ["back", "gone"])
    engine = harness.restarted()
    harness.clock.now += 55
    engine.step()
    back = come_back(engine, "back", placed["back"][2])
    harness.clock.now += 10  # past the restart's grace (60 s), within a lease of the return
    heartbeat(engine, back)
    engine.step()
    assert harness.stages(placed["gone"][1]) == {"jobs.held": "STARTED"}
    harness.clock.now += 6  # a lease after the last return
    heartbeat(engine, back)
    engine.step()
    assert harness.stages(placed["gone"][1]) == {"jobs.held": "FAILED"}
    assert harness.stages(placed["back"][1]) == {"jobs.held": "STARTED"}


def test_after_a_restart_that_nobody_returns_to_nodes_lapse_when_the_grace_ends(harness):
    placed = running_on_nodes(harness, ["n1"])
    engine = harness.restarted()
    harness.clock.now += RESTART_GRACE_LEASES * 15 - 1
    engine.step()
    assert harness.stages(placed["n1"][1]) == {"jobs.held": "STARTED"}
    harness.clock.now += 2
    engine.step()
    assert harness.stages(placed["n1"][1]) == {"jobs.held": "FAILED"}


def test_a_node_that_registered_keeps_its_jobs_while_its_hello_waits_behind_others(harness):
    names = ["early", "late"]
    placed = running_on_nodes(harness, names)
    engine = harness.restarted()
    harness.clock.now += 50
    late = engine.register_node("late", Resources(4, 8 << 30, {}), {})
    harness.clock.now += 12
    early = come_back(engine, "early", placed["early"][2])
    harness.clock.now += 10  # "late" registered 22 s ago: its Hello is still to come
    heartbeat(engine, early)
    engine.step()
    assert harness.stages(placed["late"][1]) == {"jobs.held": "STARTED"}
    assert engine.node_hello(late, [placed["late"][2]]) == []
    engine.step()
    assert harness.stages(placed["late"][1]) == {"jobs.held": "STARTED"}
