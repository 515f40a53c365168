"""The chaos rounds' invariant checks catch what they are there to catch: each check is fed
the evidence of one defect and must name it, and the evidence of a legitimate outcome and
must stay quiet. (The rounds themselves are in test_chaos_rounds.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from support.chaos_parts import Marker, MarkerServer, status_shape_problem
from support.chaos_round import JobPlan, _check_task, plan_round

KEY = "wf-1/work/0"
ONE_RUN = JobPlan("work")
RETRIED_ON_3 = JobPlan("work", exits="flaky", code=3, retry_on=(3,), attempts=2)


def _start(at: float) -> Marker:
    return Marker(at, "start", KEY, None)


def _end(at: float, code: int) -> Marker:
    return Marker(at, "end", KEY, code)


def _exited(code: int) -> dict[str, Any]:
    return {"kind": "container_exited", "data": {"exit_code": code}}


def _stage(status: str, **details: Any) -> dict[str, Any]:
    return {"name": "jobs.work", "status": f"STAGE_STATUS_{status}", "details": details}


def _check(
    job: JobPlan,
    marks: list[Marker],
    exits: list[dict[str, Any]] = (),  # type: ignore[assignment]
    stage: dict[str, Any] | None = None,
    kills: list[float] = (),  # type: ignore[assignment]
) -> list[str]:
    return _check_task("wf", KEY, job, marks, list(exits), stage, list(kills))


def test_an_error_body_that_is_not_json_is_named() -> None:
    assert status_shape_problem(500, b"500 Internal Server Error") == "the body is not JSON"


def test_an_error_body_without_an_integer_code_is_named() -> None:
    problem = status_shape_problem(413, b'{"error": "too large"}')

    assert problem == "an error without an integer code"


def test_a_google_rpc_status_error_passes() -> None:
    assert (
        status_shape_problem(404, b'{"code": 5, "message": "no such workflow", "details": []}')
        is None
    )


def test_a_success_body_that_is_not_an_object_is_named() -> None:
    assert status_shape_problem(200, b"[]") == "the body is not a JSON object"


def test_a_job_without_retry_that_ran_twice_is_a_violation() -> None:
    found = _check(ONE_RUN, [_start(1), _end(2, 0), _start(3), _end(4, 0)])

    assert found == ["wf: work ran 2 times; its retry policy allows 1"]


def test_a_job_rerun_within_its_retry_budget_is_no_violation() -> None:
    marks = [_start(1), _end(2, 3), _start(3), _end(4, 0)]

    assert _check(RETRIED_ON_3, marks, [_exited(3), _exited(0)], _stage("FINISHED")) == []


def test_an_exit_code_the_command_never_exited_with_is_a_violation() -> None:
    found = _check(ONE_RUN, [_start(1), _end(2, 3)], [_exited(1)])

    assert found == ["wf: work: the API reports exit code 1; its command exited with [3]"]


def test_a_signal_exit_of_a_run_killed_before_its_end_is_no_violation() -> None:
    assert _check(ONE_RUN, [_start(1)], [_exited(137)], _stage("FAILED", exitCode=137)) == []


def test_a_finished_stage_whose_run_never_reached_its_end_is_a_violation() -> None:
    found = _check(ONE_RUN, [_start(1)], [], _stage("FINISHED"))

    assert found == ["wf: work: FINISHED, but its last run never reached its end"]


def test_a_run_that_exited_0_recorded_failed_while_no_node_was_lost_is_a_violation() -> None:
    stage = _stage("FAILED") | {"error": "node restarted"}

    found = _check(ONE_RUN, [_start(1), _end(2, 0)], [], stage)

    assert found == [
        "wf: work: recorded FAILED (node restarted) though its last run exited 0 and no node"
        " was lost after it"
    ]


def test_a_run_that_exited_0_on_a_node_killed_before_reporting_it_is_no_violation() -> None:
    stage = _stage("FAILED") | {"error": "node restarted"}

    assert _check(ONE_RUN, [_start(1), _end(2, 0)], [], stage, kills=[2.5]) == []


def test_a_round_is_drawn_again_from_its_seed() -> None:
    first = plan_round(7, backend="sqlite")

    assert plan_round(7, backend="sqlite").describe() == first.describe()
    assert plan_round(8, backend="sqlite").describe() != first.describe()


def test_the_marker_server_tells_a_run_how_many_ran_before_it(tmp_path: Path) -> None:
    server = MarkerServer(tmp_path / "markers.log")
    try:
        answers = [httpx.get(f"{server.url}/start/wf/job/1").text for _ in range(2)]
        httpx.get(f"{server.url}/end/wf/job/1/4")
    finally:
        server.close()

    assert answers == ["0", "1"]
    assert [(m.kind, m.code) for m in server.of("wf/job/1")] == [
        ("start", None),
        ("start", None),
        ("end", 4),
    ]
