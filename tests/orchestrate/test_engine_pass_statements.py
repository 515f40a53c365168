"""What a pass reads and writes: no hold query while no READY node is under a deprovision
hold (yet every way a node comes to be one is still seen), a run's first output read once,
and a workflow's tokens revoked by the pass that ends it."""

from __future__ import annotations

from sqlalchemy import event, select
from sqlalchemy.orm import Session
from support.engine_workflows import HELLO

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.orchestrate import progress
from fuzzball_core.orchestrate.states import transition
from fuzzball_core.orchestrate.transaction import Transaction
from fuzzball_core.store.models import ApiToken, Run, Stage, Workflow
from fuzzball_core.vocabulary import CredentialKind


def _reading(statements: list[str], table: str) -> list[str]:
    return [s for s in statements if s.lstrip().upper().startswith("SELECT") and table in s]


def test_passes_read_no_holds_while_no_node_is_being_deprovisioned(harness, statements):
    node = harness.node()
    harness.submit(HELLO)
    (assignment,) = harness.assignments()
    harness.engine.step()
    statements.clear()
    harness.run_to_end(node, assignment)
    assert _reading(statements, "node_holds") == []


def test_an_empty_node_is_deprovisioned_in_the_pass_after_its_hold(harness):
    harness.node("n1")
    harness.service.add_hold(harness.admin, "n1", "deprovision", "retiring")
    harness.engine.step()
    assert harness.service.get_node(harness.admin, "n1").status == "DEPROVISIONED"
    assert harness.hub.take("shutdown")


def _held_node_running_a_job(harness) -> str:
    """Node ``n1``, running a job, given a deprovision hold after the job started."""
    node = harness.node("n1")
    harness.submit(HELLO)
    (assignment,) = harness.assignments()
    harness.start(node, assignment.run_id)
    harness.engine.step()
    harness.service.add_hold(harness.admin, "n1", "deprovision", "retiring")
    return node


def test_a_held_node_back_from_offline_is_deprovisioned_once_empty(harness):
    node = _held_node_running_a_job(harness)
    harness.engine.step()
    harness.clock.now += 60  # the lease lapses: the node is OFFLINE, its run lost
    harness.engine.step()
    assert harness.service.get_node(harness.admin, "n1").status == "OFFLINE"
    harness.hub.take("shutdown")
    harness.report(node, heartbeat=node_pb2.Heartbeat())
    harness.engine.step()
    assert harness.service.get_node(harness.admin, "n1").status == "DEPROVISIONED"
    assert [n for n, _ in harness.hub.take("shutdown")] == [node]


def test_a_runs_first_output_reads_its_usage_rows_once(harness, statements):
    node, workflow_id, assignment = harness.started(HELLO)
    statements.clear()
    harness.report(node, log=node_pb2.LogData(run_id=assignment.run_id, data=b"hi\n"))
    harness.engine.step()
    assert len(_reading(statements, "log_usage")) == 1
    chunks = harness.service.read_logs(harness.user, workflow_id)
    assert "".join(chunk.data for chunk in chunks) == "hi\n"


def _token_revoked_at(harness, workflow_id: str) -> list[float | None]:
    with harness.engine.sessions() as session:
        rows = session.scalars(select(ApiToken).where(ApiToken.workflow_id == workflow_id))
        return [row.revoked_at for row in rows]


def test_the_pass_that_ends_a_workflow_revokes_its_tokens(harness):
    node = harness.node()
    workflow_id = harness.submit(HELLO)
    (assignment,) = harness.assignments()
    harness.service.accounts.issue_for(
        harness.user.account_id, credential=CredentialKind.WORKFLOW, workflow_id=workflow_id
    )
    harness.start(node, assignment.run_id)
    harness.engine.step()
    assert _token_revoked_at(harness, workflow_id) == [None]
    harness.exit(node, assignment.run_id)
    harness.engine.step()
    assert harness.status(workflow_id) == "FINISHED"
    assert _token_revoked_at(harness, workflow_id) == [harness.clock.now]


def test_a_run_made_and_placed_in_the_same_pass_is_not_read_back(harness, statements):
    node = harness.node()
    workflow_id = harness.submit(HELLO)
    (assignment,) = harness.assignments()
    assert _reading(statements, "FROM runs") == []
    harness.run_to_end(node, assignment)
    assert harness.status(workflow_id) == "FINISHED"


def test_a_run_placed_in_a_later_pass_is_assigned_without_reading_its_row(harness, statements):
    harness.submit(HELLO)  # no node yet: the run waits
    assert harness.assignments() == []
    node = harness.node()
    statements.clear()
    harness.engine.step()
    (assignment,) = harness.assignments()
    assert _reading(statements, "FROM runs") == []
    with harness.engine.sessions() as session:
        run = session.get(Run, assignment.run_id)
        assert (run.status, run.node_ids, run.assigned_at) == (
            "ASSIGNED",
            [node],
            harness.clock.now,
        )
    harness.run_to_end(node, assignment)


def test_a_started_report_sent_again_reads_no_run(harness, statements):
    node, _, assignment = harness.started(HELLO)
    statements.clear()
    harness.start(node, assignment.run_id)  # a reconnected node tells its runs again
    harness.engine.step()
    assert _reading(statements, "FROM runs") == []


def test_after_a_restart_a_started_report_sent_again_reads_no_run(harness, statements):
    node, workflow_id, assignment = harness.started(HELLO)
    harness.engine = harness.restarted()
    statements.clear()
    harness.start(node, assignment.run_id)
    harness.engine.step()
    assert _reading(statements, "FROM runs") == []
    harness.exit(node, assignment.run_id)
    harness.engine.step()
    assert harness.status(workflow_id) == "FINISHED"


def test_a_stage_left_waiting_is_reported_without_reading_its_row(harness, statements):
    harness.node(cores=1)
    harness.submit(HELLO)  # holds the node's one core
    statements.clear()
    waiting = harness.submit(HELLO)
    assert _reading(statements, "FROM stages") == []
    assert "scheduling_blocked" in harness.events(waiting)


def _stage_row(harness, workflow_id: str) -> Stage:
    with harness.engine.sessions() as session:
        return session.scalars(select(Stage).where(Stage.workflow_id == workflow_id)).one()


def test_the_pass_that_starts_a_stage_writes_it_without_a_flush(harness):
    node = harness.node()
    workflow_id = harness.submit(HELLO)
    (assignment,) = harness.assignments()
    flushes: list[Session] = []

    def record(session, *_args) -> None:
        flushes.append(session)

    event.listen(Session, "before_flush", record)
    try:
        harness.start(node, assignment.run_id)
        harness.engine.step()
    finally:
        event.remove(Session, "before_flush", record)
    stage = _stage_row(harness, workflow_id)
    assert (stage.status, stage.node_ids, stage.started_at) == (
        "STARTED",
        [node],
        harness.clock.now,
    )
    assert flushes == []


def test_a_stage_started_and_ended_in_one_pass_is_left_ended(harness):
    node = harness.node()
    workflow_id = harness.submit(HELLO)
    (assignment,) = harness.assignments()
    harness.run_to_end(node, assignment)
    stage = _stage_row(harness, workflow_id)
    assert (stage.status, stage.node_ids) == ("FINISHED", [node])
    assert harness.status(workflow_id) == "FINISHED"


def _rows(harness, workflow_id: str) -> tuple[Run, Stage, Workflow]:
    with harness.engine.sessions() as session:
        stage = session.scalars(select(Stage).where(Stage.workflow_id == workflow_id)).one()
        run = session.scalars(select(Run).where(Run.workflow_id == workflow_id)).one()
        return run, stage, session.get(Workflow, workflow_id)


def _flushes_in_pass(harness) -> list[Session]:
    flushes: list[Session] = []

    def record(session, *_args) -> None:
        flushes.append(session)

    event.listen(Session, "before_flush", record)
    try:
        harness.engine.step()
    finally:
        event.remove(Session, "before_flush", record)
    return flushes


def test_the_pass_that_ends_a_workflow_writes_its_ends_without_a_flush(harness):
    node, workflow_id, assignment = harness.started(HELLO)
    harness.clock.now += 2
    harness.exit(node, assignment.run_id)
    assert _flushes_in_pass(harness) == []
    run, stage, workflow = _rows(harness, workflow_id)
    now = harness.clock.now
    assert (run.status, run.exit_code, run.message, run.finished_at) == (
        "FINISHED",
        0,
        "exited with code 0",
        now,
    )
    assert (stage.status, stage.exit_code, stage.finished_at) == ("FINISHED", 0, now)
    assert (workflow.status, workflow.error, workflow.finished_at) == ("FINISHED", "", now)


def test_a_failed_runs_exit_code_and_message_reach_its_stage_and_workflow_rows(harness):
    node = harness.node()
    workflow_id = harness.submit(HELLO)
    (assignment,) = harness.assignments()
    harness.run_to_end(node, assignment, code=3)
    run, stage, workflow = _rows(harness, workflow_id)
    assert (run.status, run.exit_code, run.message, run.failure_cause) == (
        "FAILED",
        3,
        "exited with code 3",
        "3",
    )
    assert (stage.status, stage.exit_code, stage.message) == ("FAILED", 3, "exited with code 3")
    assert workflow.status == "FAILED" and "exited with code 3" in workflow.error


def test_a_change_after_an_end_in_the_same_pass_is_stored_over_it(harness):
    workflow_id = harness.submit(HELLO)
    with harness.engine.sessions() as session:
        tx = Transaction(session, now=harness.clock.now)
        row = session.get(Workflow, workflow_id)
        row.error = "first"
        transition(tx, row, "CANCELED", "workflow wf: canceled")
        row.error = "later"  # flushed by the ORM, after the end's own UPDATE
        tx.commit()
    _, _, workflow = _rows(harness, workflow_id)
    assert (workflow.status, workflow.error) == ("CANCELED", "later")


def test_a_single_runs_plain_exit_reads_no_run_and_ends_it_and_its_stage(harness, statements):
    node, workflow_id, assignment = harness.started(HELLO)
    harness.clock.now += 2
    statements.clear()
    harness.exit(node, assignment.run_id)
    harness.engine.step()
    assert _reading(statements, "FROM runs") == []
    assert harness.status(workflow_id) == "FINISHED"
    with harness.engine.sessions() as session:
        run = session.get(Run, assignment.run_id)
        stage = session.get(Stage, run.stage_id)
        assert (run.status, run.exit_code, run.message, run.finished_at) == (
            "FINISHED",
            0,
            "exited with code 0",
            harness.clock.now,
        )
        assert (stage.status, stage.exit_code, stage.message, stage.finished_at) == (
            "FINISHED",
            0,
            "exited with code 0",
            harness.clock.now,
        )
    ended = [
        (e.kind, e.message, e.data)
        for e in harness.service.list_events(harness.user, workflow_id)
        if e.kind in ("container_exited", "stage_finished")
    ]
    assert ended == [
        (
            "container_exited",
            f"{stage.name}: exited with code 0",
            {"exit_code": 0, "signal": 0, "task_id": None, "status": "FINISHED"},
        ),
        ("stage_finished", f"{stage.name}: exited with code 0", {}),
    ]


def test_a_single_runs_failing_exit_is_applied_through_its_row(harness, statements):
    node, workflow_id, assignment = harness.started(HELLO)
    statements.clear()
    harness.exit(node, assignment.run_id, code=3)
    harness.engine.step()
    assert _reading(statements, "FROM runs") != []
    assert harness.status(workflow_id) == "FAILED"


def test_a_jobs_start_does_not_advance_its_workflow(harness, monkeypatch):
    node = harness.node()
    workflow_id = harness.submit(HELLO)
    (assignment,) = harness.assignments()
    advanced: list[str] = []
    advance = progress.advance

    def recorded(ctx, tx, advanced_id: str) -> None:
        advanced.append(advanced_id)
        advance(ctx, tx, advanced_id)

    monkeypatch.setattr(progress, "advance", recorded)
    harness.start(node, assignment.run_id)
    harness.engine.step()
    assert advanced == []
    assert harness.stages(workflow_id) == {"jobs.hello": "STARTED"}
    harness.exit(node, assignment.run_id)
    harness.engine.step()
    assert advanced == [workflow_id]
    assert harness.status(workflow_id) == "FINISHED"


def test_a_pass_looking_for_empty_held_nodes_reads_the_holds_once(harness, statements):
    _held_node_running_a_job(harness)
    statements.clear()
    harness.engine.step()  # the node still runs its job: it stays, looked at again later
    assert len(_reading(statements, "node_holds")) == 1
    assert harness.service.get_node(harness.admin, "n1").status == "READY"
