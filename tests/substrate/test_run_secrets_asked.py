"""Which runs ask Orchestrate for their secrets as they start (``TaskDriver.secrets``).

An image, build or egress stage's run is answered only the secrets it declares and never a
token, so one declaring none asks nobody; one declaring a secret asks for its own run, and a
job's run that needs none takes the token its assignment carries, or else shares its
workflow's (:class:`WorkflowTokens`).
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from fuzzball_core.spec.models import Job
from fuzzball_core.substrate.drivers.base import RunOutcome, RunRequest, TaskDriver
from fuzzball_core.substrate.run_secrets import RunSecrets, WorkflowTokens


class _Driver(TaskDriver):
    """A driver with nothing to run: only :meth:`TaskDriver.secrets` is exercised."""

    async def start(self) -> RunOutcome | None:
        return None

    async def wait(self) -> RunOutcome:
        return RunOutcome()

    def _on_stop(self) -> None:
        return None

    def signal(self, sig: int) -> None:
        return None

    def destroy(self) -> None:
        return None


def _asked(
    job: Job | None, needed: bool, sent_token: str = ""
) -> tuple[RunSecrets | RunOutcome, list[int]]:
    """What ``secrets(needed)`` answered for run 7 (assigned with ``sent_token``) and the run
    ids it asked about."""
    calls: list[int] = []

    async def fetch(run_id: int) -> RunSecrets:
        calls.append(run_id)
        return RunSecrets(workflow_token="tok" if job is not None else "")

    request = RunRequest(7, "wf", "stage", None, job, {}, None, workflow_token=sent_token)
    node = SimpleNamespace(run_secrets=fetch, workflow_tokens=WorkflowTokens())

    async def ask() -> RunSecrets | RunOutcome:
        driver = _Driver.__new__(_Driver)
        driver.request, driver.node = request, node  # type: ignore[assignment]
        return await driver.secrets(needed)

    return asyncio.run(ask()), calls


def test_an_image_stage_run_declaring_no_secret_asks_nobody() -> None:
    answer, calls = _asked(None, needed=False)
    assert answer == RunSecrets()
    assert calls == []


def test_an_image_stage_run_declaring_a_secret_asks_for_its_run() -> None:
    _answer, calls = _asked(None, needed=True)
    assert calls == [7]


def test_a_job_run_needing_no_secret_still_gets_its_workflow_token() -> None:
    job = Job.model_validate({"image": {"uri": "docker://alpine"}, "command": ["true"]})
    answer, calls = _asked(job, needed=False)
    assert isinstance(answer, RunSecrets) and answer.workflow_token == "tok"
    assert calls == [7]


def test_a_job_run_needing_no_secret_takes_the_token_its_assignment_carries() -> None:
    job = Job.model_validate({"image": {"uri": "docker://alpine"}, "command": ["true"]})
    answer, calls = _asked(job, needed=False, sent_token="sent")
    assert isinstance(answer, RunSecrets) and answer.workflow_token == "sent"
    assert calls == []


def test_a_job_run_needing_a_secret_asks_even_with_a_token_sent() -> None:
    job = Job.model_validate({"image": {"uri": "docker://alpine"}, "command": ["true"]})
    answer, calls = _asked(job, needed=True, sent_token="sent")
    assert isinstance(answer, RunSecrets) and answer.workflow_token == "tok"
    assert calls == [7]
