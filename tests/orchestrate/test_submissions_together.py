"""Submissions that reach Orchestrate's loop in one turn (many clients submitting at once)
are stored in one transaction, each answered with its own workflow id; one that is refused
is refused alone, and the others are stored."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import select
from support.engine_workflows import ONE_JOB

from fuzzball_core.errors import FailedPrecondition
from fuzzball_core.service.submission import read_submission
from fuzzball_core.store.models import Run, Stage

CLAIMING_A_MISSING_ENDPOINT = """
version: v1
services:
  web:
    image: {uri: docker://alpine:latest}
    command: [busybox, httpd, -f, -p, "8080"]
    network:
      ports: [{name: http, port: 8080}]
      endpoints: [{name: never-made, port-name: http, persistent: true}]
"""


def submitted_together(harness, *specifications: str) -> list[str | BaseException]:
    """Submit the workflows as requests resuming in the same turn of the loop do; each
    one's workflow id, or what it was refused with."""
    engine, who = harness.engine, harness.user

    async def submit(text: str) -> str:
        parsed, raw = read_submission(text, None, "<test>", None)
        return await engine.submit_async(who, parsed, raw, "wf")

    async def main() -> list[str | BaseException]:
        return await asyncio.gather(*(submit(t) for t in specifications), return_exceptions=True)

    return asyncio.run(main())


def _inserting(statements: list[str], table: str) -> list[str]:
    return [s for s in statements if s.lstrip().startswith(f"INSERT INTO {table} ")]


def test_submissions_in_one_turn_are_stored_with_one_insert_per_table(harness, statements):
    harness.node(cores=8)
    statements.clear()

    ids = submitted_together(harness, *[ONE_JOB] * 5)

    assert len(set(ids)) == 5
    assert len(_inserting(statements, "workflows")) == 1
    assert len(_inserting(statements, "stages")) == 1
    assert len(_inserting(statements, "events")) == 1
    harness.engine.step()  # each workflow is advanced: its job placed
    assert sorted(a.workflow_id for a in harness.assignments()) == sorted(ids)
    for workflow_id in ids:
        assert harness.events(workflow_id)[0] == "workflow_started"
        assert harness.stages(workflow_id) == {"jobs.only": "PENDING"}


def test_a_submission_refused_among_others_is_refused_alone(harness):
    harness.node()

    answers = submitted_together(harness, ONE_JOB, CLAIMING_A_MISSING_ENDPOINT, ONE_JOB)

    first, refused, last = answers
    assert isinstance(refused, FailedPrecondition)
    assert "no persistent endpoint never-made" in str(refused)
    harness.engine.step()
    assert sorted(a.workflow_id for a in harness.assignments()) == sorted([first, last])
    assert len(harness.service.list_workflows(harness.user)) == 2


def test_the_runs_of_every_stage_a_pass_starts_are_inserted_with_one_statement(harness, statements):
    harness.node(cores=8)
    ids = submitted_together(harness, *[ONE_JOB] * 5)
    statements.clear()

    harness.engine.step()  # each workflow is advanced: its job placed

    assert len(_inserting(statements, "runs")) == 1
    assignments = harness.assignments()
    assert sorted(a.workflow_id for a in assignments) == sorted(ids)
    assert len({a.run_id for a in assignments}) == 5


def test_runs_added_to_a_transaction_are_inserted_and_queued_before_its_next_query(harness):
    ctx = harness.engine.context
    workflow_id = harness.submit(ONE_JOB)  # no node: its run waits
    (waiting,) = ctx.pending.values()
    tx = ctx.transaction()
    with tx.session:
        stage = tx.session.get_one(Stage, waiting.stage_id)
        queued: list[dict[int | None, int]] = []
        row = {"workflow_id": workflow_id, "stage_id": stage.id, "status": "PENDING"}
        tx.add_task_runs([{**row, "task_id": 7, "created_at": 0.0, "attempt": 2}], queued.append)
        assert queued == []

        read = tx.session.scalars(select(Run).where(Run.task_id == 7)).all()

        assert [(r.stage_id, r.attempt) for r in read] == [(stage.id, 2)]
        assert queued == [{7: read[0].id}]


def test_runs_added_to_a_transaction_are_queued_when_it_commits(harness):
    ctx = harness.engine.context
    workflow_id = harness.submit(ONE_JOB)
    (waiting,) = ctx.pending.values()
    tx = ctx.transaction()
    queued: list[dict[int | None, int]] = []
    with tx.session:
        row = {"workflow_id": workflow_id, "stage_id": waiting.stage_id, "status": "PENDING"}
        tx.add_task_runs([{**row, "task_id": 3, "created_at": 0.0, "attempt": 1}], queued.append)
        tx.commit()

    (inserted,) = queued
    with ctx.sessions() as session:
        assert session.get_one(Run, inserted[3]).task_id == 3


# SQLite's runs INSERT writes a VALUES row a run: its text grows with them
@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_on_postgresql_the_runs_insert_has_one_text_whatever_the_number_of_rows(
    harness, statements
):
    ctx = harness.engine.context
    workflow_id = harness.submit(ONE_JOB)  # no node: its run waits
    (waiting,) = ctx.pending.values()
    row = {"workflow_id": workflow_id, "stage_id": waiting.stage_id, "status": "PENDING"}
    queued: list[dict[int | None, int]] = []
    tx = ctx.transaction()
    with tx.session:
        statements.clear()
        for tasks in (range(10, 12), range(20, 25)):
            rows = [{**row, "task_id": t, "created_at": 0.0, "attempt": 1} for t in tasks]
            tx.add_task_runs(rows, queued.append)
            tx.insert_runs()

        texts = _inserting(statements, "runs")
        read = tx.session.scalars(select(Run).where(Run.task_id >= 10)).all()

    assert len(texts) == 2 and texts[0] == texts[1]  # 2 rows, then 5: one text
    assert {r.task_id: r.id for r in read} == {**queued[0], **queued[1]}
    assert {(r.node_ids == [], r.message) for r in read} == {(True, "")}
