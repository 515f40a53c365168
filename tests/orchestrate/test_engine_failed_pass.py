"""A pass that fails changes nothing: its reports are applied again in the next pass, the
scheduler's view is rebuilt from the database, and nothing runs twice."""

from __future__ import annotations

import asyncio
import sqlite3
from collections import Counter

import pytest
from sqlalchemy import event
from sqlalchemy.exc import OperationalError

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.orchestrate import node_reports, placement

TWO_STEPS = """
version: v4
jobs:
  first:
    image: {uri: docker://alpine:latest}
    command: ["true"]
  second:
    image: {uri: docker://alpine:latest}
    command: ["true"]
    depends-on: [{name: first}]
"""

ARRAY = """
version: v4
jobs:
  sweep:
    image: {uri: docker://alpine:latest}
    command: ["true"]
    task-array: {start: 1, end: 3}
"""


def fail_next_commit(harness, error: str = "database is locked") -> None:
    """Make the next commit of the engine's database fail with ``error``, as SQLite does (a
    locked database by default)."""
    failed = []

    def locked(session) -> None:
        if not failed:
            failed.append(session)
            raise OperationalError("COMMIT", {}, sqlite3.OperationalError(error))

    event.listen(harness.engine.sessions, "before_commit", locked)


def run_all(harness, node: str, seen: Counter) -> None:
    """Run every assignment sent until none is left, counting them by run."""
    while batch := harness.assignments():
        for assignment in batch:
            seen[assignment.run_id] += 1
            harness.run_to_end(node, assignment)


def test_a_pass_whose_commit_fails_applies_its_reports_in_the_next_and_runs_each_step_once(
    harness,
):
    node = harness.node()
    wf = harness.submit(TWO_STEPS)
    (first,) = harness.assignments()
    harness.start(node, first.run_id)
    harness.exit(node, first.run_id)
    fail_next_commit(harness)  # the pass ending `first` and placing `second` is lost
    with pytest.raises(OperationalError):
        harness.engine.step()
    assert harness.assignments() == []  # nothing left for nodes before the commit
    harness.engine.step()
    seen = Counter({first.run_id: 1})
    run_all(harness, node, seen)
    assert harness.status(wf) == "FINISHED"
    assert len(seen) == 2 and set(seen.values()) == {1}
    assert harness.events(wf).count("container_exited") == 2


def test_a_part_raising_after_placement_leaves_the_run_to_be_placed_once_in_the_next_pass(
    harness, monkeypatch
):
    node = harness.node(cores=1)
    send = placement.send_assignment
    calls = []

    def fails_once(*args, **kwargs) -> None:
        calls.append(args)
        if len(calls) == 1:
            raise RuntimeError("injected")
        send(*args, **kwargs)

    monkeypatch.setattr(placement, "send_assignment", fails_once)
    wf = harness.service.start_workflow(harness.user, raw_specification=ARRAY, name="wf")
    with pytest.raises(RuntimeError, match="injected"):
        harness.engine.step()
    harness.engine.step()
    seen: Counter = Counter()
    run_all(harness, node, seen)
    assert harness.status(wf) == "FINISHED"
    assert len(seen) == 3 and set(seen.values()) == {1}
    assert harness.engine.scheduler.node_usage(node).used_cores == 0


def test_a_report_that_fails_every_pass_is_dropped_after_three_and_the_rest_go_on(
    harness, monkeypatch
):
    node = harness.node()
    wf = harness.submit(TWO_STEPS)
    (first,) = harness.assignments()
    apply = node_reports.apply

    def poisoned(ctx, tx, node_id, message) -> None:
        if message.WhichOneof("kind") == "log":
            raise RuntimeError("poison")
        apply(ctx, tx, node_id, message)

    monkeypatch.setattr(node_reports, "apply", poisoned)
    harness.report(node, log=node_pb2.LogData(run_id=first.run_id, data=b"x"))
    harness.start(node, first.run_id)
    harness.exit(node, first.run_id)
    for _ in range(3):
        with pytest.raises(RuntimeError, match="poison"):
            harness.engine.step()
    harness.engine.step()
    (second,) = harness.assignments()
    harness.run_to_end(node, second)
    assert harness.status(wf) == "FINISHED"


def test_the_engine_loop_carries_on_after_a_pass_raises(harness, monkeypatch):
    engine = harness.engine
    step = engine.step
    calls = []

    async def main() -> None:
        passed = asyncio.Event()

        def fails_once(budget: float) -> None:
            calls.append(None)
            if len(calls) == 1:
                raise RuntimeError("injected")
            step(budget)
            passed.set()

        monkeypatch.setattr(engine, "step", fails_once)
        loop = asyncio.create_task(engine.run(tick=0.01))
        try:
            await asyncio.wait_for(passed.wait(), timeout=60)  # a hang guard, not a timing
        finally:
            loop.cancel()

    asyncio.run(main())
    assert engine.failed_passes == 1


def test_the_engine_loop_retries_a_start_up_recovery_that_raises(harness, monkeypatch):
    engine = harness.engine
    recover = engine.recover
    recoveries = []

    async def main() -> None:
        recovered = asyncio.Event()

        def fails_once() -> None:
            recoveries.append(None)
            if len(recoveries) == 1:
                raise OperationalError("SELECT", {}, sqlite3.OperationalError("unable to open"))
            recover()
            recovered.set()

        monkeypatch.setattr(engine, "recover", fails_once)
        loop = asyncio.create_task(engine.run(tick=0.01))
        try:
            await asyncio.wait_for(recovered.wait(), timeout=60)  # a hang guard
        finally:
            loop.cancel()

    asyncio.run(main())
    assert (len(recoveries), engine.failed_passes) == (2, 1)


def test_a_hold_whose_commit_fails_leaves_the_node_taking_work(harness):
    node = harness.node()
    # not a busy database, which a change tries again (tests/orchestrate/test_store_faults.py)
    fail_next_commit(harness, "disk I/O error")
    with pytest.raises(OperationalError):
        harness.engine.add_hold(node, "cordon", "admin", "repair", "admin")
    harness.submit(TWO_STEPS)
    assert [a.stage_name for a in harness.assignments()] == ["jobs.first"]


PROBED_SERVICE = """
version: v4
services:
  db:
    image: {uri: docker://alpine:latest}
    command: [sleep, "600"]
    readiness-probe: {tcp-socket: {port: 5432}, period-seconds: 1}
jobs:
  client:
    image: {uri: docker://alpine:latest}
    command: ["true"]
    depends-on: [{name: db, status: RUNNING}]
"""


def test_a_readiness_report_of_a_failed_pass_is_recorded_by_the_next(harness):
    node, wf, service = harness.started(PROBED_SERVICE)
    harness.report(node, ready=node_pb2.RunReady(run_id=service.run_id))
    fail_next_commit(harness)
    with pytest.raises(OperationalError):
        harness.engine.step()
    harness.engine.step()
    assert harness.events(wf).count("service_ready") == 1
    assert [a.stage_name for a in harness.assignments()] == ["jobs.client"]
