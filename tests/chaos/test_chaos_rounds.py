"""Fault-injection rounds on a real cluster: Orchestrate and Substrates SIGKILLed, the SQLite
database locked, the data disk filled, the registry killed mid-pull, PostgreSQL restarted,
while a stream of workflows runs; every invariant of ``chaos_round`` holds at the end.

Two short rounds with fixed seeds, each striking with every fault its database allows; more
(and randomly drawn) rounds run in ``bench/chaos.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.chaos_parts import PrivatePostgres
from support.chaos_round import plan_round, run_round
from support.cluster import LocalRegistry

pytestmark = [pytest.mark.root, pytest.mark.slow]


def _assert_round_holds(report_text: str, violations: list[str]) -> None:
    assert violations == [], f"{report_text}\n" + "\n".join(violations)


def test_every_invariant_holds_through_every_fault_on_sqlite(
    tmp_path: Path, chaos_registry: LocalRegistry
) -> None:
    plan = plan_round(20261203, backend="sqlite", window=9.0, every_fault=True)

    report = run_round(plan, tmp_path / "round", chaos_registry)

    _assert_round_holds(f"{plan.describe()}\n{report.summary()}", report.violations)


def test_every_invariant_holds_through_every_fault_on_postgresql(
    tmp_path: Path, chaos_registry: LocalRegistry, chaos_postgres: PrivatePostgres
) -> None:
    plan = plan_round(20261204, backend="postgresql", window=9.0, every_fault=True)

    report = run_round(plan, tmp_path / "round", chaos_registry, postgres=chaos_postgres)

    _assert_round_holds(f"{plan.describe()}\n{report.summary()}", report.violations)
