"""The engine's stage semantics, with the node side played by the test through the same
messages a Substrate sends."""

import json

import pytest
from support.engine_workflows import HELLO

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.errors import InvalidArgument
from fuzzball_core.orchestrate.engine import Engine
from fuzzball_plugins.schedulers.default import DefaultScheduler

CHAIN = """
version: v1
jobs:
  one:
    image: {uri: docker://alpine:latest}
    command: ["true"]
  two:
    image: {uri: docker://alpine:latest}
    command: ["true"]
    requires: [one]
  three:
    image: {uri: docker://alpine:latest}
    command: ["true"]
    requires: [two]
"""

ON_FAILURE = """
version: v4
jobs:
  main:
    image: {uri: docker://alpine:latest}
    command: ["false"]
  cleanup:
    image: {uri: docker://alpine:latest}
    command: ["true"]
    depends-on: [{name: main, status: FAILED}]
  report:
    image: {uri: docker://alpine:latest}
    command: ["true"]
    depends-on: [{name: main, status: FINISHED}]
"""

ARRAY = """
version: v1
jobs:
  sweep:
    image: {uri: docker://alpine:latest}
    command: ["true"]
    task-array: {start: 1, end: 50, concurrency: 5}
"""


def test_single_job_runs_and_the_workflow_finishes(harness):
    node = harness.node()
    wf = harness.submit(HELLO)
    (assignment,) = harness.assignments()
    assert assignment.stage_name == "jobs.hello"
    harness.run_to_end(node, assignment)
    assert harness.stages(wf) == {"jobs.hello": "FINISHED"}
    assert harness.status(wf) == "FINISHED"
    assert harness.events(wf) == [
        "workflow_started",
        "scheduled",
        "stage_started",
        "container_exited",
        "stage_finished",
        "workflow_finished",
    ]


def test_the_node_receives_a_jobs_files_with_their_contents(harness):
    harness.node()
    harness.submit(
        """
version: v4
files:
  greeting: "hello\\n"
  unused: "never sent"
jobs:
  hello:
    image: {uri: docker://alpine:latest}
    command: [cat, /tmp/greeting]
    files: {/tmp/greeting: "file://greeting"}
"""
    )
    (assignment,) = harness.assignments()
    payload = json.loads(assignment.job_json)
    assert payload["files"] == {"/tmp/greeting": "hello\n"}
    assert "never sent" not in assignment.job_json


def test_chain_runs_in_dependency_order(harness):
    node = harness.node()
    wf = harness.submit(CHAIN)
    for expected in ("jobs.one", "jobs.two", "jobs.three"):
        (assignment,) = harness.assignments()
        assert assignment.stage_name == expected
        harness.run_to_end(node, assignment)
    assert harness.status(wf) == "FINISHED"


def test_failure_runs_the_on_failure_job_and_skips_the_on_success_one(harness):
    node = harness.node()
    wf = harness.submit(ON_FAILURE)
    (main,) = harness.assignments()
    harness.run_to_end(node, main, code=3)
    (cleanup,) = harness.assignments()
    assert cleanup.stage_name == "jobs.cleanup"
    harness.run_to_end(node, cleanup)
    stages = harness.stages(wf)
    assert stages == {"jobs.main": "FAILED", "jobs.cleanup": "FINISHED", "jobs.report": "CANCELED"}
    assert harness.status(wf) == "FAILED"


def test_success_skips_the_on_failure_job(harness):
    node = harness.node()
    wf = harness.submit(ON_FAILURE)
    (main,) = harness.assignments()
    harness.run_to_end(node, main, code=0)
    (report,) = harness.assignments()
    assert report.stage_name == "jobs.report"
    harness.run_to_end(node, report)
    assert harness.stages(wf)["jobs.cleanup"] == "CANCELED"
    assert harness.status(wf) == "FINISHED"


def test_exit_code_and_message_are_recorded(harness):
    node = harness.node()
    wf = harness.submit(HELLO)
    (assignment,) = harness.assignments()
    harness.run_to_end(node, assignment, code=7)
    (stage,) = harness.service.get_workflow(harness.user, wf).stages
    assert stage.exit_code == 7
    assert stage.message == "exited with code 7"


def test_task_array_honours_concurrency(harness):
    node = harness.node(cores=64)
    harness.submit(ARRAY)
    first = harness.assignments()
    assert len(first) == 5
    assert sorted(a.task_id for a in first) == [1, 2, 3, 4, 5]
    harness.run_to_end(node, first[0])
    assert [a.task_id for a in harness.assignments()] == [6]


def test_tasks_ending_in_one_pass_write_their_stage_once_and_start_the_next(harness, statements):
    node = harness.node(cores=64)
    harness.submit(ARRAY)
    first = harness.assignments()
    for assignment in first:
        harness.start(node, assignment.run_id)
        harness.exit(node, assignment.run_id)
    statements.clear()
    harness.engine.step()
    # one flush for all five, not one per ended task (each wrote the stage's counts)
    updates = [s for s in statements if s.lstrip().upper().startswith("UPDATE STAGES")]
    assert len(updates) == 1
    assert sorted(a.task_id for a in harness.assignments()) == [6, 7, 8, 9, 10]


def test_task_array_finishes_when_every_task_did(harness):
    node = harness.node(cores=64)
    wf = harness.submit(ARRAY)
    done = 0
    while batch := harness.assignments():
        for assignment in batch:
            harness.run_to_end(node, assignment)
            done += 1
    assert done == 50
    assert harness.status(wf) == "FINISHED"


def test_a_failing_task_fails_the_array_and_cancels_its_siblings(harness):
    node = harness.node(cores=64)
    wf = harness.submit(ARRAY)
    batch = harness.assignments()
    for assignment in batch:
        harness.start(node, assignment.run_id)
    harness.exit(node, batch[2].run_id, code=1)
    harness.engine.step()
    cancels = harness.hub.take("cancel")
    assert {m.cancel.run_id for _, m in cancels} == {a.run_id for a in batch} - {batch[2].run_id}
    assert harness.status(wf) == "FAILED"
    assert harness.assignments() == []


def test_stop_cancels_running_work(harness):
    _, wf, assignment = harness.started(CHAIN)
    harness.service.stop_workflow(harness.user, wf)
    (cancel,) = harness.hub.take("cancel")
    assert cancel[1].cancel.run_id == assignment.run_id
    assert harness.status(wf) == "CANCELED"
    assert set(harness.stages(wf).values()) == {"CANCELED"}


def test_timeout_fails_the_stage_saying_so(harness):
    node = harness.node()
    slow = "command: [sleep, '60']\n    policy: {timeout: {execute: 2s}}"
    wf = harness.submit(HELLO.replace("command: [echo, hi]", slow))
    (assignment,) = harness.assignments()
    assert assignment.timeout_seconds == 2
    harness.start(node, assignment.run_id)
    harness.exit(node, assignment.run_id, code=-1, signal=9, timed_out=True)
    harness.engine.step()
    (stage,) = harness.service.get_workflow(harness.user, wf).stages
    assert stage.status == "FAILED"
    assert "policy.timeout.execute of 2s" in stage.message


def test_job_too_big_for_any_node_is_refused_at_submission(harness):
    harness.node(cores=4, memory=8 << 30)
    big = HELLO.replace(
        "command: [echo, hi]", "command: [echo, hi]\n    resource: {cpu: {cores: 64}}"
    )
    with pytest.raises(InvalidArgument) as excinfo:
        harness.submit(big)
    assert "jobs.hello.resource" in excinfo.value.message
    assert "64 cores" in excinfo.value.message
    assert "largest node has 4 cores" in excinfo.value.message


def test_lost_node_fails_its_job_and_frees_capacity(harness):
    node, wf, _ = harness.started(HELLO)
    harness.clock.now += 60
    harness.engine.step()
    (stage,) = harness.service.get_workflow(harness.user, wf).stages
    assert stage.status == "FAILED"
    assert "stopped responding" in stage.message
    assert harness.service.get_node(harness.admin, node).used_cores == 0


def test_reconnecting_node_gets_assignments_it_never_received(harness):
    node = harness.node()
    harness.submit(HELLO)
    (assignment,) = harness.assignments()
    unwanted = harness.engine.node_hello(node, [])
    assert unwanted == []
    (again,) = harness.assignments()
    assert again.run_id == assignment.run_id


def test_reconnecting_node_is_told_to_drop_runs_that_ended(harness):
    node = harness.node()
    harness.submit(HELLO)
    (assignment,) = harness.assignments()
    harness.run_to_end(node, assignment)
    assert harness.engine.node_hello(node, [assignment.run_id, 999]) == [assignment.run_id, 999]


def test_restarted_engine_recovers_running_work(harness):
    node, wf, assignment = harness.started(CHAIN)
    # a new engine over the same database, as after Orchestrate was SIGKILLed
    engine = Engine(harness.engine.sessions, DefaultScheduler(), harness.hub, clock=harness.clock)
    engine.recover()
    assert engine.node_hello(node, [assignment.run_id]) == []
    engine.node_message(
        node, node_pb2.NodeMessage(exited=node_pb2.RunExited(run_id=assignment.run_id))
    )
    engine.step()
    assert harness.stages(wf)["jobs.one"] == "FINISHED"
    assert [m.assign.stage_name for _, m in harness.hub.take("assign")] == ["jobs.two"]


def test_restarted_engine_does_not_run_finished_work_again(harness):
    node = harness.node()
    wf = harness.submit(CHAIN)
    (first,) = harness.assignments()
    harness.run_to_end(node, first)
    harness.hub.take("assign")
    engine = Engine(harness.engine.sessions, DefaultScheduler(), harness.hub, clock=harness.clock)
    engine.recover()
    engine.node_hello(node, [])
    engine.step()
    assert [m.assign.stage_name for _, m in harness.hub.take("assign")] == ["jobs.two"]
    assert harness.stages(wf)["jobs.one"] == "FINISHED"


def test_engine_restarted_after_a_long_outage_gives_nodes_time_to_reconnect(harness):
    node, wf, assignment = harness.started(HELLO)
    harness.clock.now += 600  # Orchestrate was down for ten minutes
    engine = Engine(harness.engine.sessions, DefaultScheduler(), harness.hub, clock=harness.clock)
    engine.recover()
    engine.step()
    assert harness.stages(wf)["jobs.hello"] == "STARTED"
    engine.node_hello(node, [assignment.run_id])
    engine.node_message(
        node, node_pb2.NodeMessage(exited=node_pb2.RunExited(run_id=assignment.run_id))
    )
    engine.step()
    assert harness.status(wf) == "FINISHED"


def test_node_reported_times_are_kept(harness):
    node = harness.node()
    wf = harness.submit(HELLO)
    (assignment,) = harness.assignments()
    started = harness.clock.now - 3
    harness.report(node, started=node_pb2.RunStarted(run_id=assignment.run_id, time=started))
    harness.exit(node, assignment.run_id, time=started + 1)
    harness.clock.now += 30
    harness.engine.step()
    (stage,) = harness.service.get_workflow(harness.user, wf).stages
    assert stage.started_at == started
    assert stage.finished_at == started + 1


def test_nodes_get_back_the_time_orchestrate_itself_was_stalled(harness):
    _, wf, _ = harness.started(HELLO)
    harness.clock.now += 60  # the loop was blocked for a minute; heartbeats are queued
    harness.engine.extend_leases(60)
    harness.engine.step()
    assert harness.stages(wf)["jobs.hello"] == "STARTED"
