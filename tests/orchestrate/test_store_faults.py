"""The store under faults: a database busy with another writer, and a data disk that fills up
and frees again. The engine answers clearly, loses no node report, and carries on without a
restart once the fault is gone.

The full disk is real: the SQLite store lives on a small tmpfs the test fills with a file and
frees by deleting it. The busy database is real too: another connection holds SQLite's write
lock, with the busy timeout shortened so that a test does not wait ten seconds per try.
"""

from __future__ import annotations

import asyncio
import errno
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import event
from sqlalchemy.exc import OperationalError

from fuzzball_core.errors import ResourceExhausted, Unavailable
from fuzzball_core.orchestrate import node_reports
from fuzzball_core.orchestrate.engine import LOOP
from fuzzball_core.store import database

FILLER = "filler"
#: what SQLite says when a write finds no room
FULL = "database or disk is full"


def fill(disk: Path) -> None:
    """Write a file on ``disk`` until not one byte more fits."""
    with (disk / FILLER).open("wb", buffering=0) as filler:
        for chunk in (1 << 16, 1 << 12, 1):
            try:
                while True:
                    filler.write(b"\0" * chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC


def free(disk: Path) -> None:
    """Delete what :func:`fill` wrote."""
    (disk / FILLER).unlink()


ONE_JOB = """
version: v4
jobs:
  only:
    image: {uri: docker://alpine:latest}
    command: ["true"]
"""


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs, unmounted afterwards."""
    mount = tmp_path / "data"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.fixture
def full_disk_harness(small_disk: Path, build):
    """A harness whose SQLite store lives on the small tmpfs."""
    return build(f"sqlite:///{small_disk / 'orchestrate.db'}")


@pytest.fixture
def short_busy_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite waits 50 ms for another writer's lock instead of ten seconds."""
    monkeypatch.setattr(database, "BUSY_TIMEOUT_MS", 50)


class WriteLock:
    """Another connection holding the SQLite store's write lock (as a backup tool or a second
    writer would) until released."""

    def __init__(self, path: Path) -> None:
        self._connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._connection.execute("BEGIN IMMEDIATE")
        self.held = True

    def release(self) -> None:
        if self.held:
            self._connection.execute("ROLLBACK")
            self._connection.close()
            self.held = False


def test_a_submission_to_a_full_data_dir_answers_resource_exhausted_naming_the_dir(
    full_disk_harness, small_disk
):
    harness = full_disk_harness
    harness.node()
    fill(small_disk)

    with pytest.raises(ResourceExhausted) as refused:
        harness.service.start_workflow(harness.user, raw_specification=ONE_JOB, name="wf")

    assert f"the data directory {small_disk}" in refused.value.message
    assert "full" in refused.value.message


def test_workflows_schedule_again_once_the_full_data_dir_has_room_without_a_restart(
    full_disk_harness, small_disk
):
    harness = full_disk_harness
    node = harness.node()
    fill(small_disk)
    with pytest.raises(ResourceExhausted):
        harness.service.start_workflow(harness.user, raw_specification=ONE_JOB, name="wf")
    free(small_disk)

    workflow = harness.submit(ONE_JOB)
    (assignment,) = harness.assignments()
    harness.run_to_end(node, assignment)

    assert harness.status(workflow) == "FINISHED"


def test_a_node_report_outlives_passes_failing_on_a_full_data_dir(full_disk_harness, small_disk):
    harness = full_disk_harness
    node = harness.node()
    workflow = harness.submit(ONE_JOB)
    (assignment,) = harness.assignments()
    harness.start(node, assignment.run_id)
    harness.exit(node, assignment.run_id)
    fill(small_disk)
    for _ in range(5):
        with pytest.raises(Exception) as failed:
            harness.engine.step()
        assert database.is_full(failed.value)
    free(small_disk)

    harness.engine.step()

    assert harness.status(workflow) == "FINISHED"


def test_a_node_report_whose_application_meets_a_full_disk_is_kept_past_three_passes(
    harness, monkeypatch
):
    node = harness.node()
    workflow = harness.submit(ONE_JOB)
    (assignment,) = harness.assignments()
    apply = node_reports.apply
    failures = []

    def full_while_applying(ctx, tx, node_id, message) -> None:
        # a write flushed while the report is applied meets the full disk, five passes long
        if message.WhichOneof("kind") == "exited" and len(failures) < 5:
            failures.append(message)
            raise OperationalError("UPDATE", {}, sqlite3.OperationalError(FULL))
        apply(ctx, tx, node_id, message)

    monkeypatch.setattr(node_reports, "apply", full_while_applying)
    harness.start(node, assignment.run_id)
    harness.exit(node, assignment.run_id)
    for _ in range(5):
        with pytest.raises(OperationalError):
            harness.engine.step()

    harness.engine.step()

    assert harness.status(workflow) == "FINISHED"


def test_a_node_report_outlives_passes_failing_on_a_held_write_lock(
    short_busy_timeout, tmp_path, build
):
    path = tmp_path / "orchestrate.db"
    harness = build(f"sqlite:///{path}")
    node = harness.node()
    workflow = harness.submit(ONE_JOB)
    (assignment,) = harness.assignments()
    harness.start(node, assignment.run_id)
    harness.exit(node, assignment.run_id)
    lock = WriteLock(path)
    try:
        for _ in range(5):  # more passes than a report that itself fails may take
            with pytest.raises(Exception) as failed:
                harness.engine.step()
            assert database.is_busy(failed.value)
    finally:
        lock.release()

    harness.engine.step()

    assert harness.status(workflow) == "FINISHED"


def test_a_change_meeting_a_briefly_held_write_lock_is_tried_again_and_succeeds(
    short_busy_timeout, tmp_path, build
):
    path = tmp_path / "orchestrate.db"
    harness = build(f"sqlite:///{path}")
    harness.node()
    lock = WriteLock(path)
    # the other writer lets go as soon as this engine's first try has been refused
    bind = harness.engine.sessions.kw["bind"]
    event.listen(bind, "handle_error", lambda context: lock.release())
    try:
        workflow = harness.service.start_workflow(
            harness.user, raw_specification=ONE_JOB, name="wf"
        )
    finally:
        lock.release()

    harness.engine.step()
    assert [a.workflow_id for a in harness.assignments()] == [workflow]


def test_a_change_meeting_a_write_lock_held_throughout_answers_unavailable(
    short_busy_timeout, tmp_path, build
):
    path = tmp_path / "orchestrate.db"
    harness = build(f"sqlite:///{path}")
    node = harness.node()
    lock = WriteLock(path)
    try:
        with pytest.raises(Unavailable, match="the database is busy"):
            harness.engine.add_hold(node, "cordon", "admin", "repair", "admin")
    finally:
        lock.release()

    assert harness.engine.add_hold(node, "cordon", "admin", "repair", "admin") > 0


def test_the_engine_loop_shows_a_failing_pass_as_its_health_condition_until_one_passes(
    harness, monkeypatch
):
    engine = harness.engine
    step = engine.step
    seen: list[tuple[bool, str]] = []

    async def main() -> None:
        passed = asyncio.Event()

        def fails_once(budget: float) -> None:
            seen.append((engine.health.get(LOOP).ok, engine.health.get(LOOP).message))
            if len(seen) == 1:
                raise RuntimeError("injected failure")
            step(budget)
            passed.set()

        monkeypatch.setattr(engine, "step", fails_once)
        loop = asyncio.create_task(engine.run(tick=0.01))
        try:
            await asyncio.wait_for(passed.wait(), timeout=60)  # a hang guard, not a timing
            while not engine.health.get(LOOP).ok:
                await asyncio.sleep(0)
        finally:
            loop.cancel()

    asyncio.run(main())
    assert seen[0] == (False, "no pass yet")
    assert seen[1] == (False, "RuntimeError: injected failure")
    assert engine.health.get(LOOP).ok and engine.health.ready()


def test_the_engine_loop_survives_a_lease_extension_that_fails(harness, monkeypatch):
    engine = harness.engine
    engine.lease_seconds = 0.03  # a pass of 20 ms counts as a stall and extends the leases
    extend = engine.extend_leases
    extensions: list[float] = []
    step = engine.step

    def slow_step(budget: float) -> None:
        time.sleep(0.02)  # longer than lease/3 on any machine, so every next turn extends
        step(budget)

    monkeypatch.setattr(engine, "step", slow_step)

    async def main() -> None:
        extended = asyncio.Event()

        def fails_once(seconds: float) -> None:
            extensions.append(seconds)
            if len(extensions) == 1:
                raise sqlite3.OperationalError("database is locked")
            extend(seconds)
            extended.set()

        monkeypatch.setattr(engine, "extend_leases", fails_once)
        loop = asyncio.create_task(engine.run(tick=0.02))
        try:
            await asyncio.wait_for(extended.wait(), timeout=60)  # a hang guard
        finally:
            loop.cancel()

    asyncio.run(main())
    assert engine.failed_passes >= 1 and len(extensions) >= 2
