"""SQLite's WAL checkpoints run by the checkpoint thread, not inside a commit."""

from __future__ import annotations

import gc
import logging
import os
import signal
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text

from fuzzball_core.store import wal_checkpoints
from fuzzball_core.store.database import background_checkpoints, connect
from fuzzball_core.store.wal_checkpoints import BACKSTOP_PAGES, WalCheckpoints

PAGE = 4096


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = connect(f"sqlite:///{tmp_path / 'store.db'}")
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE pages (data BLOB)"))
    yield engine
    engine.dispose()


def _checkpoints(engine: Engine) -> WalCheckpoints:
    checkpoints = background_checkpoints(engine)
    assert checkpoints is not None
    return checkpoints


def _write(engine: Engine, commits: int, size: int = 100) -> None:
    for _ in range(commits):
        with engine.begin() as connection:
            connection.execute(text("INSERT INTO pages VALUES (randomblob(:size))"), {"size": size})


def _until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "not within the timeout"
        time.sleep(0.02)


def test_a_commit_is_checkpointed_by_the_checkpoint_thread(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wal_checkpoints, "CHECKPOINT_DELAY", 0.05)
    threads: list[str] = []
    checkpoint = WalCheckpoints.checkpoint

    def recorded(self: WalCheckpoints) -> object:
        threads.append(threading.current_thread().name)
        return checkpoint(self)

    monkeypatch.setattr(WalCheckpoints, "checkpoint", recorded)
    checkpoints = _checkpoints(engine)
    before = checkpoints.count
    _write(engine, 5, size=20_000)
    _until(lambda: checkpoints.count > before)
    assert threads and set(threads) == {"sqlite-checkpoints"}
    assert checkpoints.last is not None
    assert checkpoints.last.wal_pages > 0
    assert checkpoints.last.checkpointed == checkpoints.last.wal_pages


def test_the_store_connections_leave_checkpoints_to_the_thread(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # the thread is kept from running: SQLite's default (1,000 pages) would have checkpointed
    # and started the WAL over, here it grows past that
    monkeypatch.setattr(wal_checkpoints, "CHECKPOINT_DELAY", 3600.0)
    with engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar() == BACKSTOP_PAGES
    _write(engine, 300, size=4 * PAGE)
    assert (tmp_path / "store.db-wal").stat().st_size > 1_200 * PAGE


def test_commits_within_the_delay_share_one_checkpoint(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wal_checkpoints, "CHECKPOINT_DELAY", 1.0)
    checkpoints = _checkpoints(engine)
    _until(lambda: checkpoints.count > 0)  # the fixture's CREATE TABLE
    before = checkpoints.count
    _write(engine, 20)
    _until(lambda: checkpoints.count > before)
    time.sleep(1.5)  # past another delay: nothing more was due
    assert checkpoints.count == before + 1


def test_a_commit_does_not_wait_for_a_checkpoint_under_way(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wal_checkpoints, "CHECKPOINT_DELAY", 0.01)
    entered, release = threading.Event(), threading.Event()
    checkpoint = WalCheckpoints.checkpoint

    def held(self: WalCheckpoints) -> object:
        entered.set()
        release.wait(30)
        return checkpoint(self)

    monkeypatch.setattr(WalCheckpoints, "checkpoint", held)
    try:
        _write(engine, 1)
        assert entered.wait(10)
        committing = threading.Thread(target=_write, args=(engine, 3))
        committing.start()
        committing.join(10)
        assert not committing.is_alive()  # three commits while the checkpoint is held
    finally:
        release.set()
    checkpoints = _checkpoints(engine)
    _until(lambda: checkpoints.count >= 2)  # and the commits made another one due


def test_a_missing_database_is_not_created_by_its_checkpoint(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(wal_checkpoints, "CHECKPOINT_DELAY", 0.01)
    caplog.set_level(logging.DEBUG, logger=wal_checkpoints.__name__)
    checkpoints = WalCheckpoints(tmp_path / "removed.db")
    checkpoints.committed()
    _until(lambda: "not run" in caplog.text)
    assert not list(tmp_path.iterdir())
    assert checkpoints.count == 0


def test_letting_the_engine_go_closes_its_checkpoints(tmp_path: Path) -> None:
    engine = connect(f"sqlite:///{tmp_path / 'store.db'}")
    checkpoints = _checkpoints(engine)
    engine.dispose()
    del engine
    gc.collect()
    assert checkpoints._closed
    checkpoints.committed()
    assert not checkpoints._pending


def test_an_engine_collected_during_its_own_checkpoint_is_closed_without_waiting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A collection can run in the checkpoint thread while it checkpoints the very engine it
    finds unreachable: the engine's finalizer closing the checkpoints must not wait on the
    checkpoint under way in its own thread (a deadlock that stopped every later collection in
    the process)."""
    monkeypatch.setattr(wal_checkpoints, "CHECKPOINT_DELAY", 3600.0)
    connect_sqlite = sqlite3.connect

    def collecting(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        gc.collect()  # as an allocation in the checkpoint may start one
        return connect_sqlite(*args, **kwargs)

    monkeypatch.setattr(wal_checkpoints.sqlite3, "connect", collecting)
    gc.disable()  # the engine stays, unreachable, until the checkpoint's collection
    try:
        engine = connect(f"sqlite:///{tmp_path / 'store.db'}")
        checkpoints = _checkpoints(engine)
        with engine.begin() as connection:
            connection.execute(text("CREATE TABLE pages (data BLOB)"))
        cycle: list[object] = [engine]
        cycle.append(cycle)
        del engine, connection, cycle
        checkpointing = threading.Thread(target=checkpoints.checkpoint, daemon=True)
        checkpointing.start()
        checkpointing.join(10)
    finally:
        gc.enable()
    assert not checkpointing.is_alive()
    assert checkpoints._closed and checkpoints._connection is None
    assert checkpoints.checkpoint() is None


def test_closing_takes_no_lock_of_the_checkpoint_threads(engine: Engine) -> None:
    """A collection in the checkpoint thread may run the finalizer amid the thread's own
    bookkeeping (its due checkpoints being read under its condition)."""
    checkpoints = _checkpoints(engine)
    _write(engine, 1)  # a checkpoint due
    with wal_checkpoints._WORKER._changed:
        closing = threading.Thread(target=checkpoints.close, daemon=True)
        closing.start()
        closing.join(10)
        assert not closing.is_alive()
    assert checkpoints._closed and checkpoints._connection is None


def test_an_in_memory_database_has_no_checkpoints() -> None:
    assert background_checkpoints(connect("sqlite:///:memory:")) is None


def test_a_forked_child_leaves_its_parents_checkpoints_alone(engine: Engine) -> None:
    checkpoints = _checkpoints(engine)
    with checkpoints._running:  # a checkpoint under way in the parent's thread at the fork
        pid = os.fork()
        if pid == 0:  # the child: would wait forever on the lock copied held
            checkpoints.committed()
            checkpoints.close()
            os._exit(0)
        deadline = time.monotonic() + 10
        while (ended := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        if ended[0] == 0:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        assert ended[0] == pid and os.waitstatus_to_exitcode(ended[1]) == 0
    assert not checkpoints._closed


def test_a_checkpoint_leaves_the_process_umask_alone(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The umask is the process's: changed in the checkpoint thread, it would make other
    threads' files private meanwhile (an image's tree unreadable to a job's user)."""
    monkeypatch.setattr(wal_checkpoints, "CHECKPOINT_DELAY", 0.01)
    umasks: list[int] = []
    connect = sqlite3.connect

    def observed(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        current = os.umask(0)
        os.umask(current)
        umasks.append(current)
        return connect(*args, **kwargs)

    monkeypatch.setattr(wal_checkpoints.sqlite3, "connect", observed)
    process_umask = os.umask(0o022)
    try:
        checkpoints = _checkpoints(engine)
        before = checkpoints.count
        _write(engine, 1)
        _until(lambda: checkpoints.count > before)
    finally:
        os.umask(process_umask)
    assert umasks and set(umasks) == {0o022}
