"""What the engine keeps for users to see: the exit code on ``stage_failed``, the traffic
each run's nodes metered (summed per stage), and the workflow's own annotations."""

import json

from fuzzball_core.service.views import MeteringView

JOB = """
version: v4
annotations: {team: genomics, zone: lab-2}
jobs:
  fetch:
    image: {uri: docker://alpine:latest}
    command: [wget, http://example.org/]
"""

ARRAY = """
version: v4
jobs:
  fetch:
    image: {uri: docker://alpine:latest}
    command: [wget, http://example.org/]
    task-array: {start: 1, end: 3}
"""

RETRIED = JOB.replace("command:", "policy: {retry: {on: [75], attempts: 2}}\n    command:")

MPI_JOB = """
version: v4
jobs:
  ring:
    image: {uri: docker://alpine:latest}
    command: [/opt/ring]
    multinode: {nodes: 2, procs-per-node: 1, implementation: mpich}
"""


def metering(ingress: int, egress: int) -> str:
    """A ``RunExited.metering_json`` as Substrate sends it (one packet per 1000 bytes)."""
    return json.dumps(
        {
            "ingress_bytes": ingress,
            "ingress_packets": ingress // 1000,
            "egress_bytes": egress,
            "egress_packets": egress // 1000,
        }
    )


def stage_failed(harness, workflow_id):
    (event,) = [
        e
        for e in harness.service.list_events(harness.user, workflow_id)
        if e.kind == "stage_failed"
    ]
    return event


def stage_of(harness, workflow_id, name):
    view = harness.service.get_workflow(harness.user, workflow_id)
    return next(stage for stage in view.stages if stage.name == name)


def test_a_stage_failed_by_its_commands_exit_carries_the_exit_code(harness):
    node = harness.node()
    workflow_id = harness.submit(JOB)
    (assignment,) = harness.assignments()
    harness.run_to_end(node, assignment, code=4)
    assert stage_failed(harness, workflow_id).data["exit_code"] == 4


def test_a_task_arrays_failing_task_gives_its_stage_failed_event_the_exit_code(harness):
    node = harness.node()
    workflow_id = harness.submit(ARRAY)
    first, *_ = harness.assignments()
    harness.run_to_end(node, first, code=9)
    assert stage_failed(harness, workflow_id).data["exit_code"] == 9


def test_a_stage_failed_without_an_exit_has_no_exit_code(harness):
    node = harness.node()
    workflow_id = harness.submit(
        JOB.replace("command:", "policy: {timeout: {execute: 2s}}\n    command:")
    )
    (assignment,) = harness.assignments()
    harness.start(node, assignment.run_id)
    harness.exit(node, assignment.run_id, code=-1, signal=9, timed_out=True)
    harness.engine.step()
    assert "exit_code" not in stage_failed(harness, workflow_id).data


def test_a_finished_stage_shows_the_traffic_its_run_metered(harness):
    node = harness.node()
    workflow_id = harness.submit(JOB)
    (assignment,) = harness.assignments()
    harness.start(node, assignment.run_id)
    harness.exit(node, assignment.run_id, 0, metering_json=metering(52_000, 3_000))
    harness.engine.step()
    assert stage_of(harness, workflow_id, "jobs.fetch").metering == MeteringView(
        52_000, 52, 3_000, 3
    )


def test_a_stage_never_metered_has_no_metering(harness):
    node = harness.node()
    workflow_id = harness.submit(JOB)
    (assignment,) = harness.assignments()
    harness.run_to_end(node, assignment)
    assert stage_of(harness, workflow_id, "jobs.fetch").metering is None


def test_a_task_arrays_traffic_is_summed_over_its_tasks(harness):
    node = harness.node()
    workflow_id = harness.submit(ARRAY)
    for assignment in harness.assignments():
        harness.start(node, assignment.run_id)
        harness.exit(node, assignment.run_id, 0, metering_json=metering(1_000, 2_000))
    harness.engine.step()
    assert stage_of(harness, workflow_id, "jobs.fetch").metering == MeteringView(3_000, 3, 6_000, 6)


def test_every_attempt_of_a_retried_stage_counts_in_its_traffic(harness):
    node = harness.node()
    workflow_id = harness.submit(RETRIED)
    (first,) = harness.assignments()
    harness.start(node, first.run_id)
    harness.exit(node, first.run_id, 75, metering_json=metering(10_000, 0))
    harness.engine.step()
    (second,) = harness.assignments()
    harness.start(node, second.run_id)
    harness.exit(node, second.run_id, 0, metering_json=metering(20_000, 1_000))
    harness.engine.step()
    assert stage_of(harness, workflow_id, "jobs.fetch").metering == MeteringView(
        30_000, 30, 1_000, 1
    )


def test_an_exit_reported_again_after_a_reconnect_is_counted_once(harness):
    node = harness.node()
    workflow_id = harness.submit(JOB)
    (assignment,) = harness.assignments()
    harness.start(node, assignment.run_id)
    for _ in range(2):
        harness.exit(node, assignment.run_id, 0, metering_json=metering(5_000, 5_000))
        harness.engine.step()
    assert stage_of(harness, workflow_id, "jobs.fetch").metering == MeteringView(5_000, 5, 5_000, 5)


def test_a_multinode_runs_traffic_is_summed_over_its_nodes(harness):
    nodes = [harness.node(name) for name in ("a", "b")]
    workflow_id = harness.submit(MPI_JOB)
    (node_a, message), (node_b, _) = harness.sent("assign")
    run_id = message.assign.run_id
    for node in nodes:
        harness.start(node, run_id)
    harness.exit(node_a, run_id, 0, metering_json=metering(4_000, 1_000))
    harness.exit(node_b, run_id, 0, metering_json=metering(2_000, 7_000))
    harness.engine.step()
    assert stage_of(harness, workflow_id, "jobs.ring").metering == MeteringView(6_000, 6, 8_000, 8)


def test_unreadable_metering_is_dropped_and_the_run_still_ends(harness):
    node = harness.node()
    workflow_id = harness.submit(JOB)
    (assignment,) = harness.assignments()
    harness.start(node, assignment.run_id)
    harness.exit(node, assignment.run_id, 0, metering_json="[not counters")
    harness.engine.step()
    fetched = stage_of(harness, workflow_id, "jobs.fetch")
    assert (fetched.status, fetched.metering) == ("FINISHED", None)


def test_a_workflows_annotations_are_stored_and_shown(harness):
    harness.node()
    workflow_id = harness.submit(JOB)
    view = harness.service.get_workflow(harness.user, workflow_id)
    assert view.annotations == {"team": "genomics", "zone": "lab-2"}


def test_a_workflow_without_annotations_shows_none(harness):
    harness.node()
    workflow_id = harness.submit(ARRAY)
    assert harness.service.get_workflow(harness.user, workflow_id).annotations == {}
