"""Submissions are prepared (parsed, planned, their images pinned) off the event loop in
threads of their own, as many at once as :data:`PREPARE_THREADS`: pins of one image share a
registry round trip only among the preparations in flight."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from support.engine_workflows import ONE_JOB

from fuzzball_core.orchestrate.submission import PREPARE_THREADS


def test_a_burst_of_submissions_is_prepared_prepare_threads_at_once(
    harness: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # each preparation waits for all the others of the burst: only as many threads as the
    # burst let it through (the loop's default executor, the cores plus four, did not)
    together = threading.Barrier(PREPARE_THREADS, timeout=30)
    prepare = harness.engine.prepare

    def waiting_for_the_others(*args: Any, **kwargs: Any) -> Any:
        together.wait()
        return prepare(*args, **kwargs)

    monkeypatch.setattr(harness.engine, "prepare", waiting_for_the_others)

    async def burst() -> list[Any]:
        return await asyncio.gather(
            *(
                harness.service.start_workflow_async(
                    harness.user, raw_specification=ONE_JOB, name=f"wf-{n}"
                )
                for n in range(PREPARE_THREADS)
            )
        )

    started = asyncio.run(burst())

    # each stored (an unknown id raises NotFound)
    assert len({harness.status(workflow.id) and workflow.id for workflow in started}) == (
        PREPARE_THREADS
    )
