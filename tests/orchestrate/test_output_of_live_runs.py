"""Output of a live run (placed, not ended) applied from what the engine knows of it: its
row is not read (only its ``output_received``, for counted output), so a task that prints a
line and exits in one pass still ends without its row, and its output is stored once. A
pass's chunks and new usage rows are inserted together as it commits, in the order printed."""

from __future__ import annotations

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.config import LogsConfig

THREE_TASKS = """
version: v1
jobs:
  zero:
    image: {uri: docker://alpine:latest}
    command: ["true"]
    resource: {cpu: {cores: 1}, memory: {size: 64MB}}
    task-array: {start: 1, end: 3}
"""


def started_tasks(harness) -> tuple[str, str, list[int]]:
    """A node, a three-task array on it and its runs' ids, every task started."""
    node = harness.node(cores=4)
    workflow_id = harness.submit(THREE_TASKS)
    run_ids = [assignment.run_id for assignment in harness.assignments()]
    for run_id in run_ids:
        harness.start(node, run_id)
    harness.engine.step()
    return node, workflow_id, run_ids


def prints(harness, node: str, run_id: int, data: bytes, seq: int = 1) -> None:
    harness.report(node, log=node_pb2.LogData(run_id=run_id, stream="stdout", data=data, seq=seq))


def log_text(harness, workflow_id: str) -> str:
    return "".join(c.data for c in harness.service.read_logs(harness.user, workflow_id))


def _run_reads(statements: list[str]) -> list[str]:
    return [s for s in statements if s.lstrip().upper().startswith("SELECT") and "FROM runs" in s]


def test_tasks_that_print_and_exit_in_one_pass_read_only_what_their_nodes_received(
    harness, statements
):
    node, workflow_id, run_ids = started_tasks(harness)
    statements.clear()
    for run_id in run_ids:
        prints(harness, node, run_id, b"hollow\n")
        harness.exit(node, run_id)
    harness.engine.step()
    (read,) = _run_reads(statements)
    assert read.split("FROM")[0].split() == ["SELECT", "runs.id,", "runs.output_received"]
    assert harness.status(workflow_id) == "FINISHED"
    assert log_text(harness, workflow_id) == "hollow\n" * 3


def test_a_chunk_sent_again_after_its_task_ended_is_stored_once(harness):
    node, workflow_id, (run_id, *_) = started_tasks(harness)
    prints(harness, node, run_id, b"once\n")
    harness.exit(node, run_id)
    harness.engine.step()
    prints(harness, node, run_id, b"once\n")  # after a reconnect: the run's row is read now
    harness.engine.step()
    assert log_text(harness, workflow_id) == "once\n"


def test_a_live_runs_chunks_of_one_pass_are_each_stored_once(harness):
    node, workflow_id, (run_id, *_) = started_tasks(harness)
    prints(harness, node, run_id, b"one\n", seq=1)
    prints(harness, node, run_id, b"two\n", seq=2)
    prints(harness, node, run_id, b"one\n", seq=1)
    harness.engine.step()
    prints(harness, node, run_id, b"two\n", seq=2)
    prints(harness, node, run_id, b"three\n", seq=3)
    harness.engine.step()
    assert log_text(harness, workflow_id) == "one\ntwo\nthree\n"


def _inserts(statements: list[str], table: str) -> list[str]:
    return [s for s in statements if s.lstrip().upper().startswith(f"INSERT INTO {table.upper()}")]


def test_a_passs_chunks_and_new_usage_rows_are_inserted_in_one_statement_each(harness, statements):
    node, workflow_id, run_ids = started_tasks(harness)
    statements.clear()
    for run_id in run_ids:
        prints(harness, node, run_id, b"hollow\n")
    harness.engine.step()
    assert len(_inserts(statements, "log_chunks")) == 1
    assert len(_inserts(statements, "log_usage")) == 1
    assert log_text(harness, workflow_id) == "hollow\n" * 3


def test_a_line_printed_before_another_tasks_cut_in_the_same_pass_reads_before_its_marker(
    harness,
):
    node, workflow_id, (first, second, _) = started_tasks(harness)
    harness.engine.context.log_limits = LogsConfig(max_bytes_per_job=8, max_bytes_per_workflow=100)
    prints(harness, node, first, b"ok\n", seq=1)
    prints(harness, node, second, b"too long a line\n", seq=1)
    prints(harness, node, first, b"ok\n", seq=2)
    harness.engine.step()
    log = log_text(harness, workflow_id)
    assert log.startswith("ok\ntoo long\n[fuzzball] output cut here")
    assert log.endswith("not stored\nok\n")
