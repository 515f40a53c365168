"""Live workflows' rows kept between passes: a workflow's and its stages' rows are read from
the store once while it runs, and what changes them outside the passes that hold them (a
stop, a failed pass or a refused change, a restart; an eviction: test_engine_holds) is
never answered from a stale copy."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, update
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session
from support.engine_workflows import HELLO
from test_engine_failed_pass import TWO_STEPS, fail_next_commit

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.errors import FailedPrecondition
from fuzzball_core.orchestrate.transaction import Transaction
from fuzzball_core.store.database import row_key
from fuzzball_core.store.models import Workflow


def _reading(statements: list[str], *tables: str) -> list[str]:
    return [
        s
        for s in statements
        if s.lstrip().upper().startswith("SELECT")
        and any(f"FROM {table}" in s or f"JOIN {table}" in s for table in tables)
    ]


def test_a_run_placed_in_a_later_pass_reads_no_workflow_or_stage_row(harness, statements):
    workflow_id = harness.submit(HELLO)  # no node yet: the run waits
    node = harness.node()
    statements.clear()
    harness.engine.step()
    (assignment,) = harness.assignments()
    assert _reading(statements, "workflows", "stages") == []
    assert assignment.workflow_id == workflow_id
    assert assignment.stage_name and assignment.job_json
    harness.run_to_end(node, assignment)
    assert harness.status(workflow_id) == "FINISHED"


def test_a_runs_start_and_exit_read_no_workflow_or_stage_row(harness, statements):
    node = harness.node()
    workflow_id = harness.submit(HELLO)
    (assignment,) = harness.assignments()
    statements.clear()
    harness.start(node, assignment.run_id)
    harness.engine.step()
    harness.exit(node, assignment.run_id)
    harness.engine.step()
    assert _reading(statements, "workflows", "stages") == []
    assert harness.status(workflow_id) == "FINISHED"


def test_a_workflow_stopped_while_its_first_step_runs_starts_no_second_step(harness):
    node = harness.node()
    workflow_id = harness.submit(TWO_STEPS)
    (assignment,) = harness.assignments()
    harness.start(node, assignment.run_id)
    harness.engine.step()  # its rows are kept, its first stage STARTED
    harness.engine.stop(workflow_id)  # its own copies of the rows, in a change
    harness.exit(node, assignment.run_id, canceled=True)
    harness.engine.step()
    assert harness.assignments() == []
    assert harness.status(workflow_id) == "CANCELED"
    assert harness.stages(workflow_id) == {"jobs.first": "CANCELED", "jobs.second": "CANCELED"}


def test_a_pass_that_failed_after_ending_a_stage_ends_it_again_in_the_next(harness):
    node, workflow_id, first = harness.started(TWO_STEPS)
    fail_next_commit(harness)
    harness.exit(node, first.run_id)
    with pytest.raises(OperationalError):
        harness.engine.step()  # ends the first stage in memory, then fails to commit
    harness.engine.step()  # the exit applied again
    assert harness.stages(workflow_id) == {"jobs.first": "FINISHED", "jobs.second": "PENDING"}
    (second,) = harness.assignments()
    harness.run_to_end(node, second)
    assert harness.status(workflow_id) == "FINISHED"


def test_a_restarted_engine_ends_a_workflow_the_old_one_kept(harness):
    node, workflow_id, assignment = harness.started(HELLO)
    harness.engine = harness.restarted()
    harness.report(node, heartbeat=node_pb2.Heartbeat())
    harness.exit(node, assignment.run_id)
    harness.engine.step()
    assert harness.status(workflow_id) == "FINISHED"


def _kept_name(harness, workflow_id: str) -> str:
    def read(tx: Transaction) -> str:
        tx.load_workflows([workflow_id])
        return tx.session.get(Workflow, workflow_id).name

    return harness.engine.change(read)


def test_a_change_refused_after_touching_a_kept_row_leaves_it_as_stored(harness):
    _, workflow_id, _ = harness.started(HELLO)
    stored = _kept_name(harness, workflow_id)

    def rename_then_refuse(tx: Transaction) -> None:
        tx.load_workflows([workflow_id])
        tx.session.get(Workflow, workflow_id).name = "renamed"
        raise FailedPrecondition("refused")

    with pytest.raises(FailedPrecondition):
        harness.engine.change(rename_then_refuse)
    assert _kept_name(harness, workflow_id) == stored != "renamed"


def test_a_transaction_takes_a_row_it_holds_from_its_session_and_reads_one_it_lacks(harness):
    workflow_id = harness.submit(HELLO)
    with harness.engine.sessions() as session:
        tx = Transaction(session, now=harness.clock.now)
        assert row_key(Workflow, workflow_id) == Session.identity_key(Workflow, workflow_id)
        read = tx.get(Workflow, workflow_id)  # not held: read
        assert read is not None and read.id == workflow_id
        assert tx.get(Workflow, workflow_id) is read  # held: the same row
        assert tx.get(Workflow, "no-such-workflow") is None


def test_a_transaction_reads_again_a_row_its_session_holds_expired(harness):
    workflow_id = harness.submit(HELLO)
    with harness.engine.sessions() as session:
        tx = Transaction(session, now=harness.clock.now)
        held = tx.get(Workflow, workflow_id)
        assert held is not None
        session.execute(update(Workflow).where(Workflow.id == workflow_id).values(name="renamed"))
        session.expire(held)
        again = tx.get(Workflow, workflow_id)
        assert again is held
        assert "name" not in inspect(held).expired_attributes
        assert held.name == "renamed"
