"""Background processes that ``fuzzball local`` starts and finds again by their pid files.

A pid file alone does not say a process is ours and alive: the process may have died and be
a zombie its parent has not reaped yet, or have died long ago and its pid been given to a
stranger. A process counts as running only when ``/proc/PID/stat`` shows it is not a zombie
and ``/proc/PID/cmdline`` is the command it was started with (past the interpreter's or
program's path, which a symlink may spell otherwise).
"""

from __future__ import annotations

import logging
import subprocess
import time
from pathlib import Path

from fuzzball_core.store.private_files import open_private

log = logging.getLogger("fuzzball.local")

#: ``/proc/PID/stat`` states of a process that has exited (zombie, dead)
EXITED_STATES = frozenset({"Z", "X", "x"})

#: how long :func:`start_detached` waits for ``/proc`` to show the new command line
SHOWN_WITHIN = 10.0


def process_state(pid: int) -> str | None:
    """The one-letter state of ``pid`` from ``/proc/PID/stat``; None when there is no such pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # the command name in parentheses may hold spaces and ')': the state follows the last ')'
    return stat.rpartition(")")[2].split()[0]


def command_line(pid: int) -> list[str] | None:
    """``pid``'s arguments from ``/proc/PID/cmdline``; None when they cannot be read."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return raw.decode(errors="replace").split("\0")[:-1]


def running_pid(pid_file: Path, argv: list[str]) -> int | None:
    """The pid in ``pid_file`` when that process is alive and runs ``argv``, else None."""
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    state = process_state(pid)
    if state is None or state in EXITED_STATES:
        return None
    running = command_line(pid)
    if running is None or running[1:] != argv[1:]:
        return None
    return pid


def start_detached(argv: list[str], pid_file: Path, log_file: Path) -> subprocess.Popen[bytes]:
    """Start ``argv`` in a session of its own, its output appended to ``log_file`` (0600), and
    write its pid file; return once :func:`running_pid` knows it, or it has exited.

    ``Popen`` returns once the child's exec has closed its descriptors, but the kernel sets
    the new command line a moment later: read in between, ``/proc/PID/cmdline`` is empty, and
    a ``down`` or a second ``up`` right after took the new process for a stranger's (one in
    three starts under load here), leaving it running or starting it twice."""
    with open_private(log_file, "ab") as out:
        child = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    pid_file.write_text(f"{child.pid}\n")
    deadline = time.monotonic() + SHOWN_WITHIN
    while running_pid(pid_file, argv) is None and child.poll() is None:
        if time.monotonic() > deadline:
            log.warning("%s (pid %d) does not show its command line in /proc", argv[0], child.pid)
            break
        time.sleep(0.005)
    return child
