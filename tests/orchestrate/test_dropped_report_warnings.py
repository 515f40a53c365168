"""A node repeating reports Orchestrate drops cannot fill its log: a node's first dropped
report of a kind is logged, the ones that follow within a minute are only counted (in the
metric, as every drop), and the first one after the minute is logged saying how many were
held back since; other nodes and other kinds are logged on their own."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.orchestrate.context import DROPPED_REPORT_WARNINGS_WINDOW
from fuzzball_core.orchestrate.orchestrate_metrics import OrchestrateCollector, exposition

JOB = """
version: v1
jobs:
  victim:
    image: {uri: docker://alpine:latest}
    command: [sleep, "600"]
"""

LOGGER = "fuzzball_core.orchestrate.node_reports"


@pytest.fixture(autouse=True)
def _node_report_warnings_captured(caplog) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)


def run_on_a(harness) -> tuple[str, int]:
    """Node A (one core) running the job's run, filling it: (A, the run's id)."""
    node_a = harness.node("a", cores=1)
    harness.submit(JOB)
    (assignment,) = harness.assignments()
    harness.start(node_a, assignment.run_id)
    harness.engine.step()
    return node_a, assignment.run_id


def forged_log(harness, node_id: str, run_id: int) -> None:
    harness.report(node_id, log=node_pb2.LogData(run_id=run_id, stream="stdout", data=b"x\n"))


def while_time_passes(harness, seconds: float, *node_ids: str) -> None:
    """``seconds`` pass in steps shorter than a lease, every node heartbeating each step."""
    step = 5.0
    passed = 0.0
    while passed < seconds:
        harness.clock.now += step
        passed += step
        for node_id in node_ids:
            harness.report(node_id, heartbeat=node_pb2.Heartbeat())
        harness.engine.step()


def dropped_logs_counted(harness) -> str:
    engine = harness.engine
    collector = OrchestrateCollector(
        engine.sessions, dropped_reports=lambda: engine.context.dropped_reports
    )
    text = exposition(collector).decode()
    (line,) = (
        line
        for line in text.splitlines()
        if line.startswith('fuzzball_engine_dropped_node_reports_total{kind="log"}')
    )
    return line.split()[-1]


def test_a_nodes_first_dropped_report_of_each_kind_is_logged(harness, caplog) -> None:
    _, run_id = run_on_a(harness)
    node_b = harness.node("b")
    forged_log(harness, node_b, run_id)
    harness.start(node_b, run_id)
    harness.engine.step()
    assert [r.getMessage().split(" of run")[0] for r in caplog.records] == [
        f"node b ({node_b}) reported log",
        f"node b ({node_b}) reported started",
    ]


def test_drops_repeated_within_the_window_are_counted_but_not_logged(harness, caplog) -> None:
    node_a, run_id = run_on_a(harness)
    node_b = harness.node("b")
    for _ in range(3):
        forged_log(harness, node_b, run_id)
    harness.engine.step()
    while_time_passes(harness, DROPPED_REPORT_WARNINGS_WINDOW - 10, node_a, node_b)
    forged_log(harness, node_b, run_id)
    harness.engine.step()
    assert len(caplog.records) == 1
    assert dropped_logs_counted(harness) == "4.0"


def test_the_first_drop_after_the_window_logs_how_many_were_held_back(harness, caplog) -> None:
    node_a, run_id = run_on_a(harness)
    node_b = harness.node("b")
    first_logged_at = datetime.fromtimestamp(harness.clock.now, UTC).isoformat(timespec="seconds")
    for _ in range(3):
        forged_log(harness, node_b, run_id)
    harness.engine.step()
    while_time_passes(harness, DROPPED_REPORT_WARNINGS_WINDOW, node_a, node_b)
    forged_log(harness, node_b, run_id)
    forged_log(harness, node_b, run_id)  # within the new window: held back again
    harness.engine.step()
    _, summary = (r.getMessage() for r in caplog.records)
    assert summary.startswith(f"node b ({node_b}) reported log of run {run_id}, ")
    assert f"; 2 more log reports from it dropped since {first_logged_at}, not logged" in summary


def test_another_nodes_drops_are_logged_on_their_own(harness, caplog) -> None:
    _, run_id = run_on_a(harness)
    node_b = harness.node("b")
    node_c = harness.node("c")
    forged_log(harness, node_b, run_id)
    forged_log(harness, node_b, run_id)
    forged_log(harness, node_c, run_id)
    harness.engine.step()
    assert [r.getMessage().split(" reported")[0] for r in caplog.records] == [
        f"node b ({node_b})",
        f"node c ({node_c})",
    ]
