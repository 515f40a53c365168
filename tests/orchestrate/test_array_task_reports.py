"""A task of an array, started and ended from what the engine knows of it: its ``started``
report and its plain exit (code 0, on its one node) are applied without reading its run's
row, and leave the store, the events and a restarted engine as reading it would."""

from __future__ import annotations

import json

from sqlalchemy import select

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.store.models import Run, Stage

ARRAY = """
version: v1
jobs:
  sweep:
    image: {uri: docker://alpine:latest}
    command: ["true"]
    task-array: {start: 1, end: 3, concurrency: 2}
"""

METERED = {"ingress_bytes": 10, "ingress_packets": 1, "egress_bytes": 20, "egress_packets": 2}


def _reading_runs(statements: list[str]) -> list[str]:
    return [s for s in statements if s.lstrip().upper().startswith("SELECT") and "FROM runs" in s]


def _rows(harness, model, **where):
    with harness.engine.sessions() as session:
        query = select(model).filter_by(**where)
        return list(session.scalars(query))


def test_tasks_started_and_ended_in_a_pass_read_no_run_rows(harness, statements):
    node = harness.node(cores=64)
    harness.submit(ARRAY)
    first = harness.assignments()
    statements.clear()
    for assignment in first:
        harness.start(node, assignment.run_id)
        harness.exit(node, assignment.run_id)
    harness.engine.step()
    assert _reading_runs(statements) == []
    assert [a.task_id for a in harness.assignments()] == [3]


def test_a_task_ended_unread_is_stored_with_its_reported_times_message_and_metering(harness):
    node = harness.node(cores=64)
    harness.submit(ARRAY)
    assignment = harness.assignments()[0]
    now = harness.clock.now
    harness.report(node, started=node_pb2.RunStarted(run_id=assignment.run_id, time=now - 2))
    harness.engine.step()
    exited = node_pb2.RunExited(
        run_id=assignment.run_id, exit_code=0, time=now - 1, metering_json=json.dumps(METERED)
    )
    harness.report(node, exited=exited)
    harness.engine.step()
    (run,) = _rows(harness, Run, id=assignment.run_id)
    assert (run.status, run.exit_code, run.message, run.failure_cause) == (
        "FINISHED",
        0,
        "exited with code 0",
        None,
    )
    assert (run.started_at, run.finished_at) == (now - 2, now - 1)
    assert run.metering == {node: METERED}


def test_a_task_ended_unread_records_its_exit_event_and_counts_its_stage(harness):
    node = harness.node(cores=64)
    workflow_id = harness.submit(ARRAY)
    assignment = harness.assignments()[0]
    harness.run_to_end(node, assignment)
    (event,) = [
        e
        for e in harness.service.list_events(harness.user, workflow_id)
        if e.kind == "container_exited"
    ]
    assert event.message == f"jobs.sweep task {assignment.task_id}: exited with code 0"
    assert (event.data["task_id"], event.data["status"], event.data["exit_code"]) == (
        assignment.task_id,
        "FINISHED",
        0,
    )
    (stage,) = _rows(harness, Stage, workflow_id=workflow_id)
    assert (stage.tasks_running, stage.tasks_finished) == (0, 1)


def test_every_task_ended_unread_finishes_the_array_and_its_workflow(harness):
    node = harness.node(cores=64)
    workflow_id = harness.submit(ARRAY)
    while batch := harness.assignments():
        for assignment in batch:
            harness.start(node, assignment.run_id)
            harness.exit(node, assignment.run_id)
        harness.engine.step()
    assert harness.status(workflow_id) == "FINISHED"
    assert [r.status for r in _rows(harness, Run, workflow_id=workflow_id)] == ["FINISHED"] * 3


def test_a_task_started_before_a_restart_ends_from_the_rebuilt_view(harness):
    node = harness.node(cores=64)
    workflow_id = harness.submit(ARRAY)
    assignment = harness.assignments()[0]
    harness.start(node, assignment.run_id)
    harness.engine.step()
    harness.engine = harness.restarted()
    harness.exit(node, assignment.run_id)
    harness.engine.step()
    (run,) = _rows(harness, Run, id=assignment.run_id)
    assert run.status == "FINISHED"
    (stage,) = _rows(harness, Stage, workflow_id=workflow_id)
    assert (stage.tasks_running, stage.tasks_finished) == (0, 1)


def test_a_failing_task_still_fails_its_array_through_its_row(harness):
    node = harness.node(cores=64)
    workflow_id = harness.submit(ARRAY)
    assignment = harness.assignments()[0]
    harness.run_to_end(node, assignment, code=3)
    assert harness.stages(workflow_id) == {"jobs.sweep": "FAILED"}
    (run,) = _rows(harness, Run, id=assignment.run_id)
    assert (run.status, run.failure_cause) == ("FAILED", "3")


def test_a_task_that_waited_for_a_core_is_assigned_without_reading_its_row(harness, statements):
    node = harness.node(cores=1)
    workflow_id = harness.submit(ARRAY)
    (first,) = harness.assignments()
    harness.start(node, first.run_id)
    harness.exit(node, first.run_id)
    statements.clear()
    harness.engine.step()
    (second,) = harness.assignments()
    assert second.task_id == 2
    assert _reading_runs(statements) == []
    (run,) = _rows(harness, Run, id=second.run_id)
    assert (run.status, run.node_ids, run.assigned_at) == ("ASSIGNED", [node], harness.clock.now)
    scheduled = [
        e.message
        for e in harness.service.list_events(harness.user, workflow_id)
        if e.kind == "scheduled"
    ]
    assert scheduled[-1].startswith("jobs.sweep task 2 scheduled on ")


def test_an_arrays_window_of_runs_is_inserted_with_one_statement(harness, statements):
    node = harness.node(cores=64)
    statements.clear()
    workflow_id = harness.submit(ARRAY)
    inserts = [s for s in statements if s.lstrip().upper().startswith("INSERT INTO RUNS")]
    assert len(inserts) == 1
    assignments = harness.assignments()
    assert [a.task_id for a in assignments] == [1, 2]
    runs = _rows(harness, Run, workflow_id=workflow_id)
    assert sorted((r.task_id, r.status, r.attempt, r.node_ids) for r in runs) == [
        (1, "ASSIGNED", 1, [node]),
        (2, "ASSIGNED", 1, [node]),
    ]
    assert {a.run_id for a in assignments} == {r.id for r in runs}
