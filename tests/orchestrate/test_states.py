"""The state machine of workflows, stages and runs: allowed moves, their events, and the
moves that are bugs."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session

from fuzzball_core.orchestrate.states import ASSIGNED, IllegalTransition, transition
from fuzzball_core.orchestrate.transaction import Transaction
from fuzzball_core.store.models import Run, Stage, Workflow
from fuzzball_core.vocabulary import EventKind, Status


@pytest.fixture
def tx():
    # the machine only adds event rows to the session: no database is needed to check it
    with Session() as session:
        yield Transaction(session, now=50.0)


def stage(status: str = Status.PENDING) -> Stage:
    return Stage(workflow_id="wf-1", name="jobs.a", status=status)


def run(status: str = Status.PENDING) -> Run:
    return Run(workflow_id="wf-1", stage_id=1, status=status, node_ids=["n1"])


def test_a_stage_ending_records_its_event_and_finish_time(tx):
    row = stage(Status.STARTED)
    transition(tx, row, Status.FAILED, "jobs.a: exited with code 1", when=42.0)
    assert (row.status, row.finished_at) == (Status.FAILED, 42.0)
    assert [(e["kind"], e["stage"], e["message"]) for e in tx.events] == [
        (EventKind.STAGE_FAILED, "jobs.a", "jobs.a: exited with code 1")
    ]


def test_a_stage_may_end_without_starting(tx):
    row = stage()
    transition(tx, row, Status.CANCELED, "jobs.a: skipped")
    assert row.status == Status.CANCELED and row.started_at is None


def test_an_ended_stage_cannot_start_again(tx):
    row = stage(Status.FINISHED)
    with pytest.raises(IllegalTransition, match="stage cannot move from FINISHED to STARTED"):
        transition(tx, row, Status.STARTED)
    assert row.status == Status.FINISHED and tx.events == []


def test_placing_a_run_stamps_it_and_records_scheduled(tx):
    row = run()
    transition(tx, row, ASSIGNED, "jobs.a scheduled on n1", stage_name="jobs.a", node_id="n1")
    assert (row.status, row.assigned_at) == (ASSIGNED, 50.0)
    assert [e["kind"] for e in tx.events] == [EventKind.SCHEDULED]


def test_a_run_canceled_before_placement_records_no_event(tx):
    row = run()
    transition(tx, row, Status.CANCELED)
    assert row.status == Status.CANCELED and tx.events == []


def test_a_run_cannot_finish_without_being_placed(tx):
    with pytest.raises(IllegalTransition, match="run cannot move from PENDING to FINISHED"):
        transition(tx, run(), Status.FINISHED)


def test_a_live_run_ending_records_container_exited(tx):
    row = run(Status.STARTED)
    transition(tx, row, Status.FINISHED, "jobs.a: exited with code 0", stage_name="jobs.a")
    assert [e["kind"] for e in tx.events] == [EventKind.CONTAINER_EXITED]


def test_a_workflow_ending_records_its_event(tx):
    row = Workflow(id="wf-1", name="wf", status=Status.STARTED)
    transition(tx, row, Status.CANCELED, "workflow wf: canceled")
    assert [(e["kind"], e["workflow_id"]) for e in tx.events] == [
        (EventKind.WORKFLOW_CANCELED, "wf-1")
    ]
