"""A stage as the API shows it: ``error`` holds what went wrong, never what a stage that
finished said (``details.message`` holds that for every stage)."""

from __future__ import annotations

from fuzzball_core.api.proto_messages import stage_message
from fuzzball_core.service.views import StageView
from fuzzball_core.vocabulary import StageKind, Status


def _stage(status: str, message: str) -> StageView:
    return StageView(
        id="s1",
        workflow_id="w1",
        name="jobs.hello",
        kind=StageKind.JOB,
        status=status,
        exit_code=0 if status == Status.FINISHED else 3,
        message=message,
    )


def test_a_finished_stage_has_no_error_and_says_its_exit_in_its_details():
    shown = stage_message(_stage(Status.FINISHED, "exited with code 0"))
    assert not shown.HasField("error")
    assert shown.details.message == "exited with code 0"


def test_a_failed_stage_says_why_in_its_error_and_details():
    shown = stage_message(_stage(Status.FAILED, "exited with code 3"))
    assert shown.error == "exited with code 3"
    assert shown.details.message == "exited with code 3"
