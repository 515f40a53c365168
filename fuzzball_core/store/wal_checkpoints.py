"""SQLite's WAL checkpoints in a thread of their own.

In WAL mode a commit appends its pages to the ``-wal`` file, and a checkpoint copies them back
into the database: with ``synchronous=NORMAL`` the checkpoint is where SQLite syncs, the WAL
before it and the database after it. Left to SQLite, the connection whose commit takes the WAL
past ``wal_autocheckpoint`` pages runs the checkpoint inside that commit, and Orchestrate's
commits are made on its event loop: under 2,000 separate workflows one commit in nine held the
loop 16-40 ms on the two syncs (0.5 s of a 6 s run), while node streams and API calls
waited.

Here a thread of the process checkpoints each file-backed database on its own connection,
:data:`CHECKPOINT_DELAY` after a commit (the commits of that delay share it). A checkpoint
runs ``PASSIVE``: it copies what no reader still needs and never waits for a reader or a
writer, so no commit waits for it and it waits for no commit; the writer starts the WAL over
once everything was copied. The writing connections keep SQLite's own checkpoint at
:data:`BACKSTOP_PAGES` should the thread fall behind.

It also bounds what an operating-system crash can lose: SQLite syncs the WAL only at a
checkpoint, so with its default of 1,000 pages a quiet Orchestrate's last commits could stay
unsynced for hours; here they are synced within :data:`CHECKPOINT_DELAY`.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import NamedTuple

log = logging.getLogger(__name__)

#: seconds from a commit to the checkpoint that syncs it (commits meanwhile share it)
CHECKPOINT_DELAY = 0.5
#: ``PRAGMA wal_autocheckpoint`` of the writing connections: SQLite checkpoints in the
#: committing thread only past this many WAL pages (40 MiB of 4 KiB pages), which the thread
#: keeps the WAL far below
BACKSTOP_PAGES = 10_000


class CheckpointResult(NamedTuple):
    """What one ``PRAGMA wal_checkpoint(PASSIVE)`` answered."""

    #: SQLite's busy flag: true when the checkpoint was kept from running to its end
    busy: bool
    #: the pages in the WAL
    wal_pages: int
    #: of those, the pages copied into the database (those a reader still needs are not)
    checkpointed: int


class WalCheckpoints:
    """One SQLite database file's checkpoints, run by the process's checkpoint thread.

    :meth:`committed` is called after each commit (the store's engine does it from its
    ``commit`` event); :meth:`close` when the engine is let go.
    """

    def __init__(self, database: Path) -> None:
        self.database = database
        #: checkpoints run so far, and the last one's answer
        self.count = 0
        self.last: CheckpointResult | None = None
        #: whether a checkpoint is due (set and cleared by the thread's condition)
        self._pending = False
        self._closed = False
        self._connection: sqlite3.Connection | None = None
        #: held while a checkpoint runs, so that closing waits for it
        self._running = threading.Lock()
        #: the thread running a checkpoint now, if any (see :meth:`close`)
        self._checkpointing_in: int | None = None
        #: the process whose thread runs them: a forked child leaves them alone (its copy of
        #: the lock may be held by a thread it does not have)
        self._pid = os.getpid()

    def committed(self) -> None:
        """Note a commit: a checkpoint is due :data:`CHECKPOINT_DELAY` from the first commit
        since the last one."""
        if not self._pending and os.getpid() == self._pid:
            # read without the lock: when a checkpoint is due, this is all a commit costs
            _WORKER.schedule(self, time.monotonic() + CHECKPOINT_DELAY)

    def close(self) -> None:
        """Run no more checkpoints and close the connection (after a checkpoint under way)."""
        if os.getpid() != self._pid:
            return
        # The engine's finalizer calls this, from whatever collection finds it unreachable:
        # one may run in the checkpoint thread, amid its bookkeeping or this very checkpoint.
        # So no lock of the thread's is taken (it drops a closed database's due checkpoint
        # when it comes), and none this thread holds is waited on: that wait would never end,
        # and the collector, still marked running, would collect nothing more in the process.
        self._closed = True
        self._pending = False
        if self._checkpointing_in == threading.get_ident():
            return  # the checkpoint closes the connection as it ends
        with self._running:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def checkpoint(self) -> CheckpointResult | None:
        """Checkpoint now, in the calling thread (the checkpoint thread calls this); None
        once closed."""
        with self._running:
            if self._closed:
                return None
            self._checkpointing_in = threading.get_ident()
            try:
                return self._checkpoint()
            finally:
                self._checkpointing_in = None
                if self._closed and self._connection is not None:
                    self._connection.close()
                    self._connection = None

    def _checkpoint(self) -> CheckpointResult:
        if self._connection is None:
            # rw: a database removed meanwhile is not created again, empty, here. No
            # private umask around it: the umask is the process's, and this thread runs
            # at any time (another thread's files made meanwhile would be 0600); SQLite
            # gives the WAL and shm files the database file's own mode (0600)
            self._connection = sqlite3.connect(
                f"file:{self.database}?mode=rw",
                uri=True,
                isolation_level=None,
                check_same_thread=False,
            )
        query = "PRAGMA wal_checkpoint(PASSIVE)"
        busy, pages, copied = self._connection.execute(query).fetchone()
        self.count += 1
        self.last = CheckpointResult(bool(busy), pages, copied)
        return self.last


class _Worker:
    """The thread that runs every database's due checkpoints, started with the first one
    due; it sleeps while none is."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        #: the databases with a checkpoint due, and when (monotonic seconds)
        self._due: dict[WalCheckpoints, float] = {}
        self._thread: threading.Thread | None = None

    def schedule(self, checkpoints: WalCheckpoints, due_at: float) -> None:
        """Make a checkpoint of ``checkpoints`` due at ``due_at`` unless one is due."""
        with self._changed:
            if checkpoints._pending or checkpoints._closed:
                return
            checkpoints._pending = True
            self._due[checkpoints] = due_at
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="sqlite-checkpoints", daemon=True
                )
                self._thread.start()
            self._changed.notify()

    def _run(self) -> None:
        while True:
            with self._changed:
                now = time.monotonic()
                ready = [each for each, due_at in self._due.items() if due_at <= now]
                if not ready:
                    wake_at = min(self._due.values(), default=None)
                    self._changed.wait(None if wake_at is None else wake_at - now)
                    continue
                for checkpoints in ready:
                    # cleared first: a commit during the checkpoint makes another one due
                    del self._due[checkpoints]
                    checkpoints._pending = False
            # outside the condition: a commit noting itself never waits on the syncs
            for checkpoints in ready:
                try:
                    checkpoints.checkpoint()
                except sqlite3.Error as exc:
                    # another process checkpointing, or the database gone: the next commit
                    # makes another one due, and SQLite's own backstop stays
                    log.debug("checkpoint of %s not run: %s", checkpoints.database, exc)


_WORKER = _Worker()


def _forget_in_child() -> None:
    # a forked child has no checkpoint thread, and its parent's connections are not its own
    global _WORKER
    _WORKER = _Worker()


os.register_at_fork(after_in_child=_forget_in_child)
