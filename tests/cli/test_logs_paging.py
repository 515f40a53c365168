"""``fuzzball workflow logs`` prints a log of any length: every page of it, in order."""

from __future__ import annotations

from support.live_api import HELLO

from fuzzball_core.service.views import FINISHED

#: More chunks than one page of the server's (1,000) and than reads once stopped at (5,000).
LINES = 5200
EVERY_LINE = "".join(f"line {n}\n" for n in range(1, LINES + 1))


def started_with_long_output(logged_in) -> str:
    workflow_id = logged_in.service.start_workflow(logged_in.who, raw_specification=HELLO)
    logged_in.service.emit_logs(workflow_id, "jobs.hello", EVERY_LINE.splitlines(keepends=True))
    return workflow_id


def test_logs_prints_every_line_of_a_log_longer_than_a_page(logged_in):
    workflow_id = started_with_long_output(logged_in)
    result = logged_in("workflow", "logs", workflow_id, "hello")
    assert result.exit_code == 0, result.output
    assert result.output == EVERY_LINE


def test_logs_follow_of_an_ended_workflow_prints_every_line(logged_in):
    workflow_id = started_with_long_output(logged_in)
    logged_in.service.set_stage(workflow_id, "jobs.hello", FINISHED, exit_code=0)
    result = logged_in("workflow", "logs", workflow_id, "hello", "--follow")
    assert result.exit_code == 0, result.output
    assert result.output == EVERY_LINE
