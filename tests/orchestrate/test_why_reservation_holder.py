"""``workflow why`` names the job a backfill reservation is kept for only to that job's own
account: to any other it is ``another job``.

Before, the scheduler's message said ``reserved for job run-N``, and every account whose job
waited behind the reservation read which run of which account held it."""

from __future__ import annotations

from typing import Any

import pytest

from fuzzball_plugins.schedulers.default import DefaultScheduler


def _job(cores: int, runtime: str) -> str:
    return (
        "version: v1\njobs:\n  work:\n    image: {uri: docker://alpine:latest}\n"
        "    command: ['true']\n"
        f"    resource: {{cpu: {{cores: {cores}}}, memory: {{size: 1GiB}}}}\n"
        f"    policy: {{timeout: {{execute: {runtime}}}}}\n"
    )


#: what the reservation's own account runs: 12 of the node's 16 cores for 100 s
BUSY = _job(12, "100s")
#: the reservation: the whole node, once the busy job ends
HEAD = _job(16, "100s")
#: too long to backfill before the reservation starts: it waits behind it
LONG = _job(4, "1h")


@pytest.fixture
def reserved(harness_with) -> Any:
    """One 16-core node, busy with an account's job, its head job holding the backfill
    reservation (fair share off: the queue stays in submission order)."""
    harness = harness_with(scheduler=DefaultScheduler({"fair_share": {"enabled": False}}))
    node = harness.node("n1", cores=16, memory=64 << 30)
    harness.submit(BUSY)
    (busy,) = harness.assignments()
    harness.start(node, busy.run_id)
    harness.head = harness.submit(HEAD)
    harness.other, _ = harness.service.create_account("other-tenant")
    return harness


def _why(harness: Any, who: Any, workflow_id: str) -> str:
    harness.engine.step()
    (stage,) = harness.service.explain_workflow(who, workflow_id)
    assert stage.reason == "BACKFILL_NO_FIT", stage.message
    return stage.message


def test_another_accounts_why_does_not_name_the_reserved_job(reserved):
    theirs = reserved.service.start_workflow(reserved.other, raw_specification=LONG, name="x")
    message = _why(reserved, reserved.other, theirs)
    assert "reserved for another job" in message
    assert reserved.head not in message and "run-" not in message


def test_the_reserved_jobs_own_account_reads_which_job_it_is(reserved):
    mine = reserved.service.start_workflow(reserved.user, raw_specification=LONG, name="y")
    message = _why(reserved, reserved.user, mine)
    assert f"reserved for jobs.work of workflow {reserved.head}" in message
