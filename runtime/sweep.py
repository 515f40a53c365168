"""Start-up sweep: free what an agent that died (crashed, SIGKILLed) left behind."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import cgroups
from .errors import RuntimeFailure
from .kept import kept_owner
from .native import check, lib, new_error
from .network import NodeNetwork
from .spec import DEFAULT_STATE_DIR
from .state import StateDir, holder_process, is_alive


@dataclass
class SweepReport:
    """What the sweep freed."""

    killed: list[int] = field(default_factory=list)
    records: list[str] = field(default_factory=list)
    cgroups: list[str] = field(default_factory=list)
    unmounted: list[str] = field(default_factory=list)
    #: the isolated jobs' namespaces, addresses, and the node's bridge and table, in words
    network: list[str] = field(default_factory=list)


def _kill_and_wait(pid: int, start: int, timeout: float = 5.0) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while is_alive(pid, start) and time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.005)


def sweep(state_dir: str | os.PathLike[str] = DEFAULT_STATE_DIR) -> SweepReport:
    """Free the containers of dead agents recorded in ``state_dir``.

    Containers whose agent still runs are left alone. For the others: PID 1 is SIGKILLed
    (taking the whole PID namespace with it), the cgroups removed (with the groups a dead
    agent kept for its next jobs), the image references
    dropped and unreferenced image mounts unmounted (their loop devices detach themselves),
    and their network released (:meth:`fuzzball_runtime.network.NodeNetwork.sweep`).
    """
    state = StateDir(state_dir)
    report = SweepReport()
    if not state.root.is_dir():
        return report
    live: set[str] = set()
    for record in state.records():
        if is_alive(record.agent_pid, record.agent_start):
            live.add(record.id)
            continue
        if is_alive(record.pid, record.pid_start):
            _kill_and_wait(record.pid, record.pid_start)
            report.killed.append(record.pid)
        for directory in record.cgroups:
            cgroups.remove_dir(Path(directory))
            report.cgroups.append(directory)
        if state.images.is_dir():
            state.release_image(record.image_key, record.id)
        state.remove_record(record.id)
        report.records.append(record.id)
    state.remove_dead_journals()
    # Leftovers no record points at (a crash between taking them and writing the record),
    # and the groups agents kept for their next jobs (``kept-PID-START-ID``): a live
    # agent's are its own to reuse or remove at its stop, a dead one's are removed.
    for leftover in cgroups.job_dirs(cgroups.detect_layout(), state.cgroup_group):
        if leftover.name in live:
            continue
        owner = kept_owner(leftover.name)
        if owner is not None and is_alive(*owner):
            continue
        cgroups.remove_dir(leftover)
        report.cgroups.append(str(leftover))
    report.network = NodeNetwork(state).sweep(live)
    if not live:
        layout = cgroups.detect_layout()
        report.cgroups.extend(
            str(p) for p in cgroups.remove_group_parents(layout, state.cgroup_group)
        )
    for key in state.image_keys():
        for holder in state.image_refs(key):
            # A process's reference (its containers') goes with the process; another
            # holder's (an older runtime's per-container reference) with its container.
            process = holder_process(holder)
            gone = holder not in live if process is None else not is_alive(*process)
            if gone:
                state.release_image(key, holder)
        mountpoint = state.images / key
        if not state.image_refs(key) and os.path.ismount(mountpoint):
            err = new_error()
            check(lib.fbrt_umount(bytes(mountpoint), 0, err), err, RuntimeFailure)
            report.unmounted.append(str(mountpoint))
        if not state.image_refs(key):
            for path in (mountpoint, state.images / f"{key}.refs"):
                with contextlib.suppress(OSError):
                    path.rmdir()
    return report
