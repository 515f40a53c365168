"""Counted output (``LogData.seq``): Orchestrate stores each chunk of a node's output of a
run once, however often the agent sends it, and once the pass that stored it commits tells
the node how far its output of each run is stored (``LogsStored``), so the agent can stop
keeping it for a resend after a reconnect."""

from __future__ import annotations

from support.engine_workflows import HELLO

from fuzzball_core.api.v1 import node_pb2

TWO_NODES = """
version: v1
jobs:
  ranks:
    image: {uri: docker://alpine:latest}
    command: ["true"]
    multinode: {nodes: 2, implementation: openmpi}
"""


def running(harness, spec: str = HELLO, nodes: tuple[str, ...] = ("n1",)):
    """Nodes, a workflow on them and its one run, started on each."""
    node_ids = [harness.node(name) for name in nodes]
    workflow_id = harness.submit(spec)
    (assignment, *_) = harness.assignments()
    for node in node_ids:
        harness.start(node, assignment.run_id)
    harness.engine.step()
    harness.sent("logs_stored")
    return node_ids, workflow_id, assignment.run_id


def prints(harness, node: str, run_id: int, seq: int, data: bytes) -> None:
    harness.report(node, log=node_pb2.LogData(run_id=run_id, stream="stdout", data=data, seq=seq))


def log_text(harness, workflow_id: str) -> str:
    return "".join(c.data for c in harness.service.read_logs(harness.user, workflow_id))


def stored_through(harness) -> list[tuple[str, dict[int, int]]]:
    return [(node, dict(m.logs_stored.through_seq)) for node, m in harness.sent("logs_stored")]


def test_a_chunk_sent_again_after_a_reconnect_is_stored_once(harness):
    (node,), workflow_id, run_id = running(harness)
    prints(harness, node, run_id, 1, b"start\n")
    harness.engine.step()
    # the stream broke before the LogsStored arrived: the agent sends 1 again, then 2
    prints(harness, node, run_id, 1, b"start\n")
    prints(harness, node, run_id, 2, b"done\n")
    harness.engine.step()
    assert log_text(harness, workflow_id) == "start\ndone\n"


def test_the_pass_that_stored_output_tells_the_node_how_far_each_run_is_stored(harness):
    (node,), _, run_id = running(harness)
    prints(harness, node, run_id, 1, b"a\n")
    prints(harness, node, run_id, 2, b"b\n")
    assert stored_through(harness) == []  # nothing is answered before the pass commits
    harness.engine.step()
    assert stored_through(harness) == [(node, {run_id: 2})]


def test_a_chunk_already_stored_is_acknowledged_again(harness):
    (node,), _, run_id = running(harness)
    prints(harness, node, run_id, 1, b"a\n")
    harness.engine.step()
    stored_through(harness)
    prints(harness, node, run_id, 1, b"a\n")  # the first answer was lost with the stream
    harness.engine.step()
    assert stored_through(harness) == [(node, {run_id: 1})]


def test_output_of_a_run_orchestrate_does_not_know_is_acknowledged_so_the_node_drops_it(harness):
    node = harness.node()
    prints(harness, node, 999, 3, b"x\n")
    harness.engine.step()
    assert stored_through(harness) == [(node, {999: 3})]


def test_uncounted_output_of_an_older_agent_is_stored_as_it_comes_and_not_answered(harness):
    (node,), workflow_id, run_id = running(harness)
    harness.report(node, log=node_pb2.LogData(run_id=run_id, data=b"a\n"))
    harness.report(node, log=node_pb2.LogData(run_id=run_id, data=b"a\n"))
    harness.engine.step()
    assert log_text(harness, workflow_id) == "a\na\n"
    assert stored_through(harness) == []


def test_each_node_of_a_multinode_run_counts_its_own_output(harness):
    (first, second), workflow_id, run_id = running(harness, TWO_NODES, ("n1", "n2"))
    prints(harness, first, run_id, 1, b"rank 0\n")
    prints(harness, second, run_id, 1, b"rank 1\n")
    harness.engine.step()
    assert sorted(log_text(harness, workflow_id).splitlines()) == ["rank 0", "rank 1"]
    assert sorted(stored_through(harness)) == sorted([(first, {run_id: 1}), (second, {run_id: 1})])
