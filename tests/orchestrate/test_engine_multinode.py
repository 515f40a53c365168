"""Multinode runs in the engine: every node gets its part, the run ends with the last part or
the first failure, and PMI barriers are relayed between the parts' nodes."""

import pytest

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.errors import InvalidArgument
from fuzzball_core.orchestrate.fences import FenceRelay

MPI_JOB = """
version: v4
jobs:
  ring:
    image: {uri: docker://alpine:latest}
    command: [/opt/ring]
    multinode: {nodes: 2, procs-per-node: 2, implementation: mpich}
"""


@pytest.fixture
def placed(harness):
    """MPI_JOB submitted to a three-node cluster: (workflow id, assignments by node id)."""
    harness.cluster = [harness.node(name) for name in ("a", "b", "c")]
    workflow_id = harness.submit(MPI_JOB)
    sent = harness.sent("assign")
    return workflow_id, {node_id: message.assign for node_id, message in sent}


def test_every_node_of_the_run_gets_the_same_assignment(placed) -> None:
    _, by_node = placed
    assert len(by_node) == 2
    first, second = by_node.values()
    assert first == second
    assert sorted(first.node_ids) == sorted(by_node)


def test_the_run_finishes_only_when_every_part_has(harness, placed) -> None:
    workflow_id, by_node = placed
    (node_a, assignment), (node_b, _) = by_node.items()

    harness.run_to_end(node_a, assignment)
    assert harness.stages(workflow_id) == {"jobs.ring": "STARTED"}
    assert harness.sent("cancel") == []

    harness.run_to_end(node_b, assignment)
    assert harness.stages(workflow_id) == {"jobs.ring": "FINISHED"}


def test_a_failing_part_fails_the_run_and_stops_the_other_parts(harness, placed) -> None:
    workflow_id, by_node = placed
    (node_a, assignment), (node_b, _) = by_node.items()
    harness.start(node_a, assignment.run_id)
    harness.start(node_b, assignment.run_id)

    harness.exit(node_b, assignment.run_id, message="rank 3 ended without finalizing MPI")
    harness.engine.step()

    assert harness.status(workflow_id) == "FAILED"
    cancels = harness.sent("cancel")
    assert node_a in {node_id for node_id, _ in cancels}
    assert {message.cancel.run_id for _, message in cancels} == {assignment.run_id}


def test_a_node_whose_part_finished_may_go_away_without_failing_the_run(harness, placed) -> None:
    workflow_id, by_node = placed
    (node_a, assignment), (node_b, _) = by_node.items()
    harness.run_to_end(node_a, assignment)
    harness.start(node_b, assignment.run_id)

    # node a reconnects after a restart, no longer knowing the run: its part is done
    assert harness.engine.node_hello(node_a, []) == []
    harness.engine.step()
    assert harness.stages(workflow_id) == {"jobs.ring": "STARTED"}

    harness.run_to_end(node_b, assignment)
    assert harness.status(workflow_id) == "FINISHED"


def test_a_barrier_is_released_on_every_node_once_all_reached_it(harness, placed) -> None:
    _, by_node = placed
    (node_a, assignment), (node_b, _) = by_node.items()
    run_id = assignment.run_id

    harness.report(node_a, fence=node_pb2.Fence(run_id=run_id, seq=1, kvs={"card-0": "a0"}))
    harness.engine.step()
    assert harness.sent("fence_done") == []

    harness.report(node_b, fence=node_pb2.Fence(run_id=run_id, seq=1, kvs={"card-2": "b2"}))
    harness.engine.step()
    released = harness.sent("fence_done")
    assert sorted(node_id for node_id, _ in released) == sorted(by_node)
    for _, message in released:
        assert (message.fence_done.run_id, message.fence_done.seq) == (run_id, 1)
        assert dict(message.fence_done.kvs) == {"card-0": "a0", "card-2": "b2"}


def test_fences_still_meet_after_orchestrate_restarted(harness, placed) -> None:
    _, by_node = placed
    run_id = next(iter(by_node.values())).run_id
    harness.engine.context.fences = FenceRelay()  # what a restarted Orchestrate starts with

    for node_id in by_node:  # each node sends its fence again after reconnecting
        harness.report(node_id, fence=node_pb2.Fence(run_id=run_id, seq=2, kvs={node_id: "1"}))
    harness.engine.step()

    released = harness.sent("fence_done")
    assert sorted(node_id for node_id, _ in released) == sorted(by_node)
    assert dict(released[0][1].fence_done.kvs) == {node_id: "1" for node_id in by_node}


def test_a_fence_from_a_node_outside_the_run_is_ignored(harness, placed) -> None:
    _, by_node = placed
    outsider = next(n for n in harness.cluster if n not in by_node)
    run_id = next(iter(by_node.values())).run_id
    first = next(iter(by_node))
    for node_id in (first, outsider):
        harness.report(node_id, fence=node_pb2.Fence(run_id=run_id, seq=1))
    harness.engine.step()
    assert harness.sent("fence_done") == []


def test_implementations_whose_ranks_cannot_be_started_are_refused(harness) -> None:
    harness.node()
    with pytest.raises(InvalidArgument) as refused:
        harness.submit(MPI_JOB.replace("mpich", "gasnet"))
    assert "jobs.ring.multinode.implementation" in refused.value.message
    assert "gasnet ranks cannot be started" in refused.value.message
