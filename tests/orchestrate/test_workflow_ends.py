"""Orchestrate tells nodes when workflows end, so each removes the workflow's directory (its
per-workflow volumes and ingress markers) then and not before: once, to each node that ran
one of its runs, as it ends; and, answering a node's Hello, which of the workflows it keeps
ended while it could not be told."""

from __future__ import annotations

from support.engine_workflows import HELLO
from test_node_arrivals import together
from test_restart_reconnects import running_on_nodes

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.orchestrate import nodes
from fuzzball_core.orchestrate.node_arrivals import Arrivals

#: two jobs, the second after the first (both on the node the first ran on: one core each)
TWO_STEPS = """
version: v1
jobs:
  first:
    image: {uri: docker://alpine:latest}
    command: ["true"]
    resource: {cpu: {cores: 1}, memory: {size: 1GB}}
  second:
    image: {uri: docker://alpine:latest}
    command: ["true"]
    resource: {cpu: {cores: 1}, memory: {size: 1GB}}
    requires: [first]
"""

UNKNOWN = "00000000-0000-4000-8000-000000000000"


def ended(harness) -> list[tuple[str, list[str]]]:
    """(node id, workflows named) of each WorkflowEnded sent since the last look."""
    return [
        (node_id, list(message.workflow_ended.workflow_ids))
        for node_id, message in harness.sent("workflow_ended")
    ]


def test_a_finished_workflows_node_is_told_once_that_it_ended(harness):
    node, workflow_id, assignment = harness.started(HELLO)
    harness.node("idle")  # ran nothing of it: not told
    assert ended(harness) == []

    harness.exit(node, assignment.run_id)
    harness.engine.step()

    assert harness.status(workflow_id) == "FINISHED"
    assert ended(harness) == [(node, [workflow_id])]
    harness.engine.step()
    assert ended(harness) == []


def test_no_node_is_told_while_a_later_job_of_the_workflow_is_still_to_run(harness):
    node = harness.node()
    workflow_id = harness.submit(TWO_STEPS)
    (first,) = harness.assignments()

    harness.run_to_end(node, first)

    assert harness.stages(workflow_id)["jobs.second"] != "FINISHED"
    assert ended(harness) == []
    (second,) = harness.assignments()
    harness.run_to_end(node, second)
    assert ended(harness) == [(node, [workflow_id])]


def test_a_canceled_workflows_nodes_are_told(harness):
    node, workflow_id, _ = harness.started(HELLO)

    harness.service.stop_workflow(harness.user, workflow_id)
    harness.engine.step()

    assert harness.status(workflow_id) == "CANCELED"
    assert ended(harness) == [(node, [workflow_id])]


def test_workflows_ending_in_one_pass_reach_each_node_in_one_message(harness):
    placed = running_on_nodes(harness, ["a", "b"])
    node_a, workflow_a, run_a = placed["a"]
    node_b, workflow_b, run_b = placed["b"]

    harness.exit(node_a, run_a)
    harness.exit(node_b, run_b)
    harness.engine.step()

    assert sorted(ended(harness)) == sorted([(node_a, [workflow_a]), (node_b, [workflow_b])])


def test_the_welcome_says_orchestrate_tells_workflow_ends(harness):
    node = harness.node()

    assert nodes.welcome(harness.engine.context, node).tells_workflow_ends


def test_a_hello_is_told_which_kept_workflows_ended_or_are_unknown(harness):
    node, live, _ = harness.started(HELLO)
    finished = _finished_elsewhere(harness)

    harness.engine.node_hello(node, [], kept_workflows=[live, finished, UNKNOWN])

    assert ended(harness) == [(node, sorted([finished, UNKNOWN]))]


def test_a_hello_keeping_only_live_workflows_is_told_nothing(harness):
    node, live, assignment = harness.started(HELLO)

    harness.engine.node_hello(node, [assignment.run_id], kept_workflows=[live])

    assert ended(harness) == []


def test_hellos_arriving_together_are_each_told_of_their_own_ended_workflows(harness):
    placed = running_on_nodes(harness, ["a", "b"])
    node_a, live_a, run_a = placed["a"]
    node_b, live_b, run_b = placed["b"]
    harness.exit(node_a, run_a)
    harness.engine.step()
    ended(harness)
    engine = harness.restarted()
    arrivals = Arrivals(engine.context, engine.change)

    together(
        lambda: arrivals.hello(node_a, [], [live_a]),
        lambda: arrivals.hello(node_b, [run_b], [live_b, UNKNOWN]),
    )

    assert arrivals.batches == 1
    assert sorted(ended(harness)) == sorted([(node_a, [live_a]), (node_b, [UNKNOWN])])


def test_after_a_restart_the_nodes_whose_hellos_keep_a_live_workflow_are_told_its_end(harness):
    placed = running_on_nodes(harness, ["a", "b"])
    node_a, workflow_a, run_a = placed["a"]
    node_b, _, run_b = placed["b"]
    engine = harness.restarted()
    # b ran a job of a's workflow before the restart (its run long over): only its Hello
    # says it keeps a directory of it
    engine.node_hello(node_a, [run_a], kept_workflows=[workflow_a])
    engine.node_hello(node_b, [run_b], kept_workflows=[workflow_a])
    assert ended(harness) == []

    engine.node_message(node_a, node_pb2.NodeMessage(exited=node_pb2.RunExited(run_id=run_a)))
    engine.step()

    assert sorted(ended(harness)) == sorted([(node_a, [workflow_a]), (node_b, [workflow_a])])


def _finished_elsewhere(harness) -> str:
    """Another node ran a workflow to its end: the workflow."""
    harness.node("n2")
    workflow_id = harness.submit(HELLO)
    ((node_id, message),) = harness.sent("assign")
    harness.run_to_end(node_id, message.assign)
    assert harness.status(workflow_id) == "FINISHED"
    ended(harness)
    return workflow_id
