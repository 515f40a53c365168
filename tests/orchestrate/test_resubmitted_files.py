"""A workflow file submitted again with the same text is stored again without being parsed
again: the submissions share one parse, and each is stored with its own id."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import select
from support.engine_workflows import ONE_JOB
from support.parse_counting import counting_loads

from fuzzball_core.store.models import Workflow


def test_a_file_submitted_again_is_parsed_once_and_stored_each_time(
    harness: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    harness.node(cores=8)
    loaded = counting_loads(monkeypatch)

    async def submit(name: str) -> Any:
        return await harness.service.start_workflow_async(
            harness.user, raw_specification=ONE_JOB, name=name
        )

    first = asyncio.run(submit("one"))
    second = asyncio.run(submit("two"))

    assert len(loaded) == 1
    assert first.id != second.id
    with harness.engine.sessions() as session:
        rows = session.scalars(select(Workflow).where(Workflow.id.in_([first.id, second.id]))).all()
        assert sorted(row.name for row in rows) == ["one", "two"]
        assert len({row.definition_v4 for row in rows}) == 1
