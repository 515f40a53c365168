"""A pass's writes wait past the reads that cannot see them: the runs' UPDATEs and the stages'
and usage rows' wait through the chunks of reports' reads of ``output_received`` and usage
rows, and go out once, at the commit; a read of a run row still sees the run's waiting
writes."""

from __future__ import annotations

from sqlalchemy import select

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.orchestrate.engine import REPORT_CHUNK
from fuzzball_core.store.models import Run

#: three reports a task: three chunks of reports in one pass, each with its reads
TASKS = REPORT_CHUNK

ARRAY = f"""
version: v1
jobs:
  sweep:
    image: {{uri: docker://alpine:latest}}
    command: ["true"]
    task-array: {{start: 1, end: {TASKS}}}
"""


def _kind(statement: str) -> str:
    return statement.lstrip().split(None, 1)[0].upper()


def _runs(harness) -> list[Run]:
    with harness.engine.sessions() as session:
        return list(session.scalars(select(Run).order_by(Run.task_id)))


def test_a_pass_writes_its_runs_and_stages_after_its_chunks_reads(harness, statements):
    node = harness.node(cores=TASKS)
    workflow_id = harness.submit(ARRAY)
    assignments = harness.assignments()
    assert len(assignments) == TASKS
    for assignment in assignments:
        run_id = assignment.run_id
        harness.start(node, run_id)
        harness.report(node, log=node_pb2.LogData(run_id=run_id, data=b"line\n", seq=1))
        harness.exit(node, run_id)
    statements.clear()
    harness.engine.step()
    kinds = [_kind(statement) for statement in statements]
    last_read = max(i for i, kind in enumerate(kinds) if kind == "SELECT")
    first_write = min(i for i, kind in enumerate(kinds) if kind in ("UPDATE", "INSERT"))
    assert first_write > last_read
    assert sum(s.lstrip().startswith("UPDATE stages") for s in statements) == 1
    assert harness.status(workflow_id) == "FINISHED"
    runs = _runs(harness)
    assert [run.status for run in runs] == ["FINISHED"] * TASKS
    assert all(run.started_at is not None and run.exit_code == 0 for run in runs)
    assert [run.output_received for run in runs] == [{node: 1}] * TASKS
    chunks = harness.service.read_logs(harness.user, workflow_id)
    assert "".join(chunk.data for chunk in chunks) == "line\n" * TASKS


def test_a_run_read_in_a_later_chunk_sees_its_waiting_start(harness):
    node = harness.node(cores=64)
    harness.submit(ARRAY)
    first, second, *_ = harness.assignments()
    harness.start(node, first.run_id)
    # a chunk of the other task's counted output between the start and a failing exit,
    # which reads the run's row
    for seq in range(1, REPORT_CHUNK + 1):
        log = node_pb2.LogData(run_id=second.run_id, data=b"x\n", seq=seq)
        harness.report(node, log=log)
    harness.exit(node, first.run_id, code=3)
    harness.engine.step()
    run = next(run for run in _runs(harness) if run.id == first.run_id)
    assert run.started_at is not None
    assert (run.status, run.exit_code) == ("FAILED", 3)
    assert next(r for r in _runs(harness) if r.id == second.run_id).output_received == {
        node: REPORT_CHUNK
    }
