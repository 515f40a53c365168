"""orchestrate.logs: each run of a job and each workflow keep at most so much output; what
comes past a limit is counted, not stored, and the log says where it was cut and how much
was dropped. Reads of the stored output are complete whatever its length."""

from __future__ import annotations

import pytest
from support.engine_workflows import HELLO

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.config import ConfigError, LogsConfig, parse_config
from fuzzball_core.orchestrate.server import build
from fuzzball_core.service.contract import LOG_PAGE
from fuzzball_plugins.schedulers.default import DefaultScheduler

PAIR = """
version: v1
jobs:
  pair:
    image: {uri: docker://alpine:latest}
    command: [echo, hi]
    task-array: {start: 1, end: 2}
"""

FLAKY = """
version: v4
jobs:
  flaky:
    image: {uri: docker://alpine:latest}
    command: ["true"]
    policy: {retry: {on: [75], attempts: 2}}
"""

PER_JOB = "orchestrate.logs.max-bytes-per-job"
PER_WORKFLOW = "orchestrate.logs.max-bytes-per-workflow"


def limit(harness, *, per_job: int = 10**9, per_workflow: int = 10**9) -> None:
    harness.engine.context.log_limits = LogsConfig(
        max_bytes_per_job=per_job, max_bytes_per_workflow=per_workflow
    )


def running(harness, spec: str = HELLO) -> tuple[str, str, list[node_pb2.Assignment]]:
    """A node, a workflow on it, and its runs, started."""
    node = harness.node()
    workflow_id = harness.submit(spec)
    assignments = harness.assignments()
    for assignment in assignments:
        harness.start(node, assignment.run_id)
    harness.engine.step()
    return node, workflow_id, assignments


def prints(harness, node: str, run_id: int, *pieces: bytes, stream: str = "stdout") -> None:
    for piece in pieces:
        harness.report(node, log=node_pb2.LogData(run_id=run_id, stream=stream, data=piece))
    harness.engine.step()


def log_text(harness, workflow_id: str, **which) -> str:
    return "".join(c.data for c in harness.service.read_logs(harness.user, workflow_id, **which))


def marker(dropped_bytes: int, dropped_lines: int, key: str, limit_bytes: int) -> str:
    lines = "line" if dropped_lines == 1 else "lines"
    return (
        f"[fuzzball] output cut here: {key} ({limit_bytes} bytes) reached;"
        f" {dropped_bytes} bytes ({dropped_lines} {lines}) more were counted, not stored\n"
    )


# -- the limits ---------------------------------------------------------------------------


def test_output_within_the_limits_is_stored_whole(harness):
    limit(harness, per_job=14)
    node, workflow_id, (run,) = running(harness)
    prints(harness, node, run.run_id, b"line 1\n", b"line 2\n")
    assert log_text(harness, workflow_id) == "line 1\nline 2\n"


def test_output_past_the_per_job_limit_is_cut_after_the_last_whole_line_with_a_marker(harness):
    limit(harness, per_job=20)
    node, workflow_id, (run,) = running(harness)
    prints(harness, node, run.run_id, b"line 1\nline 2\nline 3\nline 4\n")
    assert log_text(harness, workflow_id) == "line 1\nline 2\n" + marker(14, 2, PER_JOB, 20)


def test_output_after_the_cut_is_only_counted_in_the_marker(harness):
    limit(harness, per_job=7)
    node, workflow_id, (run,) = running(harness)
    prints(harness, node, run.run_id, b"line 1\nline 2\n")
    prints(harness, node, run.run_id, b"3\n", b"x")
    prints(harness, node, run.run_id, b"x")  # the same line, still open: no new line counted
    chunks = harness.service.read_logs(harness.user, workflow_id)
    assert [c.data for c in chunks] == ["line 1\n", marker(11, 3, PER_JOB, 7)]


def test_the_marker_starts_a_line_of_its_own_when_a_line_is_cut_through(harness):
    limit(harness, per_job=4)
    node, workflow_id, (run,) = running(harness)
    prints(harness, node, run.run_id, b"abcdefgh\n")
    assert log_text(harness, workflow_id) == "abcd\n" + marker(5, 0, PER_JOB, 4)


def test_the_marker_is_on_the_stream_that_was_cut(harness):
    limit(harness, per_job=3)
    node, workflow_id, (run,) = running(harness)
    prints(harness, node, run.run_id, b"oops\n", stream="stderr")
    chunks = harness.service.read_logs(harness.user, workflow_id)
    assert [(c.stream, c.data) for c in chunks] == [
        ("stderr", "oop"),
        ("stderr", "\n" + marker(2, 0, PER_JOB, 3)),
    ]


def test_the_per_workflow_limit_cuts_the_run_that_reaches_it(harness):
    limit(harness, per_workflow=8)
    node, workflow_id, (one, two) = running(harness, PAIR)
    prints(harness, node, one.run_id, b"first!!\n")
    prints(harness, node, two.run_id, b"second\n")
    assert log_text(harness, workflow_id, task_id=1) == "first!!\n"
    assert log_text(harness, workflow_id, task_id=2) == marker(7, 1, PER_WORKFLOW, 8)


def test_each_run_of_a_job_has_its_own_per_job_allowance(harness):
    limit(harness, per_job=6)
    node = harness.node()
    workflow_id = harness.submit(FLAKY)
    (first,) = harness.assignments()
    harness.start(node, first.run_id)
    prints(harness, node, first.run_id, b"try 1\n", b"more\n")
    harness.exit(node, first.run_id, 75)
    harness.engine.step()
    (second,) = harness.assignments()
    harness.start(node, second.run_id)
    prints(harness, node, second.run_id, b"try 2\n")
    assert log_text(harness, workflow_id) == "try 1\n" + marker(5, 1, PER_JOB, 6) + "try 2\n"


def test_a_cut_run_stays_cut_after_orchestrate_restarts(harness, build, database_url):
    limit(harness, per_job=7)
    node, workflow_id, (run,) = running(harness)
    prints(harness, node, run.run_id, b"line 1\nline 2\n")
    restarted = build(database_url)
    restarted.user = harness.user
    limit(restarted, per_job=7)
    restarted.engine.recover()
    prints(restarted, node, run.run_id, b"line 3\n")
    assert log_text(restarted, workflow_id) == "line 1\n" + marker(14, 2, PER_JOB, 7)


def test_limits_that_are_not_positive_sizes_are_refused_naming_their_key():
    for key in ("max-bytes-per-job", "max-bytes-per-workflow"):
        for wrong in (0, -1, "lots"):
            with pytest.raises(ConfigError, match=f"orchestrate.logs.{key}"):
                parse_config({"orchestrate": {"logs": {key: wrong}}})


def test_orchestrate_stores_output_within_the_configured_limits(tmp_path):
    config = parse_config(
        {"data-dir": str(tmp_path), "orchestrate": {"logs": {"max-bytes-per-job": "1MiB"}}}
    )
    orchestrate = build(config, DefaultScheduler())
    assert orchestrate.engine.context.log_limits.max_bytes_per_job == 1024**2


# -- reading --------------------------------------------------------------------------------


def test_a_read_returns_one_page_and_the_next_follows_its_last_seq(harness):
    node, workflow_id, (run,) = running(harness)
    lines = [f"{n}\n".encode() for n in range(LOG_PAGE + 5)]
    prints(harness, node, run.run_id, *lines)
    first = harness.service.read_logs(harness.user, workflow_id)
    rest = harness.service.read_logs(harness.user, workflow_id, after_seq=first[-1].seq)
    assert len(first) == LOG_PAGE
    assert [c.data.encode() for c in first + rest] == lines


def test_a_tail_counts_back_from_the_end_of_the_whole_log(harness):
    node, workflow_id, (run,) = running(harness)
    lines = [f"{n}\n".encode() for n in range(LOG_PAGE + 5)]
    prints(harness, node, run.run_id, *lines)
    tail = harness.service.read_logs(harness.user, workflow_id, tail=2)
    assert [c.data.encode() for c in tail] == lines[-2:]
