"""When the engine's loop passes and what a pass reads and writes: reports nothing waits on
(a run's start, its output) join the next pass instead of waking one each, the others wake
it at once; workflows come with their stages in one query, events go in one INSERT."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from sqlalchemy import select
from support.engine_workflows import HELLO

from fuzzball_core.orchestrate import engine as engine_module
from fuzzball_core.orchestrate import events
from fuzzball_core.orchestrate.transaction import Transaction
from fuzzball_core.store.models import Event
from fuzzball_core.vocabulary import EventKind

TWO = """
version: v1
jobs:
  one:
    image: {uri: docker://alpine:latest}
    command: ["true"]
  two:
    image: {uri: docker://alpine:latest}
    command: ["true"]
    requires: [one]
"""


async def _until(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    """Let the loop run until ``condition`` holds (fails the test after ``seconds``)."""
    deadline = asyncio.get_running_loop().time() + seconds
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "the engine never got there"
        await asyncio.sleep(0.01)


def _run_loop(harness, scenario: Callable[[], object]) -> None:
    """Run ``scenario`` (a coroutine function) beside the engine's own loop."""

    async def main() -> None:
        loop = asyncio.create_task(harness.engine.run(tick=3600))
        try:
            await scenario()
        finally:
            loop.cancel()

    asyncio.run(main())


def test_a_start_report_waits_for_the_next_woken_pass(harness, monkeypatch):
    monkeypatch.setattr(engine_module, "LAZY_REPORT_DELAY", 3600.0)
    node = harness.node()
    wf = harness.submit(HELLO)
    (assignment,) = harness.assignments()

    before = harness.engine.timings.passes.count

    async def scenario() -> None:
        await _until(lambda: harness.engine.timings.passes.count > before)  # the loop's first
        passes = harness.engine.timings.passes.count
        harness.start(node, assignment.run_id)
        for _ in range(20):  # turns of the loop enough for a woken pass to run
            await asyncio.sleep(0)
        assert harness.engine.timings.passes.count == passes
        assert harness.stages(wf)["jobs.hello"] == "PENDING"
        harness.exit(node, assignment.run_id)  # an exit wakes the engine at once
        await _until(lambda: harness.status(wf) == "FINISHED")
        assert harness.engine.timings.passes.count == passes + 1  # both in one pass

    _run_loop(harness, scenario)
    assert "stage_started" in harness.events(wf)


def test_a_start_report_alone_is_applied_within_the_lazy_delay(harness, monkeypatch):
    monkeypatch.setattr(engine_module, "LAZY_REPORT_DELAY", 0.05)
    node = harness.node()
    wf = harness.submit(HELLO)
    (assignment,) = harness.assignments()

    async def scenario() -> None:
        harness.start(node, assignment.run_id)
        await _until(lambda: harness.stages(wf)["jobs.hello"] == "STARTED")

    _run_loop(harness, scenario)


def test_reports_off_the_event_loop_wake_the_engine_at_once(harness):
    node = harness.node()
    harness.submit(HELLO)
    (assignment,) = harness.assignments()
    harness.start(node, assignment.run_id)  # no running loop to time a wait on
    assert harness.engine._wake.is_set()


def test_loaded_workflows_give_their_stages_without_another_query(harness, statements):
    first = harness.submit(TWO)
    second = harness.submit(TWO)
    with harness.engine.sessions() as session:
        tx = Transaction(session, now=0.0)
        statements.clear()
        tx.load_workflows([first, second])
        assert len(statements) == 1
        names = {wf: sorted(stage.name for stage in tx.stages_of(wf)) for wf in (first, second)}
        assert len(statements) == 1
    assert names[first] == names[second] == ["jobs.one", "jobs.two"]


def test_stages_of_a_workflow_not_loaded_are_queried(harness):
    wf = harness.submit(TWO)
    with harness.engine.sessions() as session:
        tx = Transaction(session, now=0.0)
        assert sorted(stage.name for stage in tx.stages_of(wf)) == ["jobs.one", "jobs.two"]


def test_a_transactions_events_are_written_in_order_by_one_insert(harness, statements):
    with harness.engine.sessions() as session:
        tx = Transaction(session, now=7.0)
        for index in range(3):
            events.record(tx, EventKind.NODE_REMOVED, f"event {index}", node_id=f"n{index}")
        statements.clear()
        tx.commit()
    assert sum(s.lstrip().upper().startswith("INSERT INTO EVENTS") for s in statements) == 1
    with harness.engine.sessions() as session:
        rows = session.scalars(select(Event).where(Event.kind == EventKind.NODE_REMOVED))
        written = [(e.message, e.node_id, e.time) for e in rows]
    assert written == [("event 0", "n0", 7.0), ("event 1", "n1", 7.0), ("event 2", "n2", 7.0)]


def test_with_a_backlog_the_next_pass_waits_out_the_gap_since_the_last():
    pause = engine_module.pause_before_pass(
        cut_short=False, waiting=engine_module.BACKLOG_RUNS, since_last=0.004
    )
    assert pause == engine_module.BACKLOG_PASS_GAP - 0.004


def test_with_a_backlog_a_gap_already_past_delays_nothing():
    pause = engine_module.pause_before_pass(
        cut_short=False,
        waiting=engine_module.BACKLOG_RUNS * 10,
        since_last=engine_module.BACKLOG_PASS_GAP * 2,
    )
    assert pause == 0.0


def test_with_fewer_runs_waiting_than_a_backlog_the_next_pass_follows_at_once():
    pause = engine_module.pause_before_pass(
        cut_short=False, waiting=engine_module.BACKLOG_RUNS - 1, since_last=0.0
    )
    assert pause == 0.0


def test_after_a_pass_cut_short_the_loop_serves_others_between_passes():
    pause = engine_module.pause_before_pass(cut_short=True, waiting=0, since_last=0.0)
    assert pause == engine_module.BETWEEN_PASSES
