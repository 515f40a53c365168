"""A job's cgroups kept for the next job of the same kind (a bounded pool per process).

Making a job's groups and removing them again (the kernel's ``mkdir`` and ``rmdir`` of a v2
group with its per-CPU counters, kernfs files and inherited programs, and metering's two
``BPF_PROG_ATTACH``) was about a tenth of the agent's start threads' CPU. A group emptied by
its job's end is given to the next job instead, when that is provably the same as a fresh
one:

- **No process is left** in any of the groups: the v2 group's ``cgroup.events`` says
  ``populated 0`` and every v1 group's ``cgroup.procs`` is empty. PID 1 was reaped, and the
  kernel had killed its PID namespace before that; a group still populated (a member not yet
  gone) is removed the old way, which kills and waits.
- **The limits are the new job's**: groups are kept by their shape (which of CPU quota,
  cpuset and pids limit the job had, metered or not, guarded from the instance metadata or
  not: the guard stays attached to a kept group) and each limit the shape holds is
  written again with the new job's value (:meth:`JobCgroups.create` on the kept groups, no
  ``mkdir``); a limit the shape lacks was never written. Jobs with a memory limit are not
  kept: a memory group keeps its job's page cache charged after the job, which would count
  towards the next job's limit. A reset that fails removes the groups; the job gets fresh
  ones.
- **Metering counts only the job's traffic**: the counters are read when the job starts and
  its figures are the difference. A group is kept only when no packet passed its programs
  during the job (the counters read at its end are all zero): a socket that carried a packet
  (a TCP connection closed as the job exited lives on as an orphan, in FIN-WAIT or with
  unsent data, still in the group) would count into the next job's figures; without one no
  such socket exists. Asking the kernel for the group's sockets (sock_diag) took 2-3 ms a
  job here (TCP's dump walks the whole connection table). Only jobs in the agent's network
  namespace are kept (the sockets of a namespace of the job's own could outlive it unseen),
  and only for a next job with the same ``keep_cgroups`` key, so that a socket a job handed
  to a process outside it unused can only be counted within that key. The agent's key is the
  workflow's owner (its account and submitting user, as the ``Assignment`` names them; the
  workflow when an older Orchestrate names none): such traffic may count to another job of
  the same owner, in another of its workflows, never to another owner's.

Kept groups are named ``kept-PID-START-ID`` after the agent process that made them: the sweep
(:func:`fuzzball_runtime.sweep`) leaves a live agent's alone and removes a dead one's, and
:func:`release_kept_cgroups` empties the pool when the agent stops.
"""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass

from . import cgroups
from .errors import MeteringError, RuntimeFailure
from .native import check, ffi, lib, new_error
from .spec import ContainerSpec, Metering
from .state import current_pid

#: prefix of a kept group's name (then the agent's pid, its start time and a container id)
KEPT_PREFIX = "kept-"
#: the most groups kept at once by one process (across all shapes)
MAX_KEPT = 64

#: (state directory's cgroup group, keep key, cpu quota set, cpuset set, pids limit set,
#: metered, guarded from the instance metadata)
Shape = tuple[str, str, bool, bool, bool, bool, bool]


def kept_name(agent_pid: int, agent_start: int, container_id: str) -> str:
    """The name of a keepable job group made by the agent (``agent_pid``, ``agent_start``)."""
    return f"{KEPT_PREFIX}{agent_pid}-{agent_start}-{container_id}"


def kept_owner(name: str) -> tuple[int, int] | None:
    """The (pid, start time) of the agent that made the kept group ``name``; None for a
    group of another name."""
    if not name.startswith(KEPT_PREFIX):
        return None
    pid, _, rest = name[len(KEPT_PREFIX) :].partition("-")
    start, _, _ = rest.partition("-")
    if not (pid.isdigit() and start.isdigit()):
        return None
    return int(pid), int(start)


def shape_of(spec: ContainerSpec, group: str) -> Shape | None:
    """The kind of kept groups ``spec``'s job may take and leave (None: its groups are made
    and removed as before: it asks for none to be kept, has a memory limit, or a network
    namespace of its own)."""
    if (
        spec.keep_cgroups is None
        or spec.memory is not None
        or spec.network
        or spec.isolated is not None
    ):
        return None
    return (
        group,
        spec.keep_cgroups,
        spec.cpus is not None,
        spec.cpuset is not None,
        spec.pids_limit is not None,
        spec.metering,
        spec.metadata_guard,  # a kept group keeps its guard: only a guarded job takes it
    )


def read_counters(meter_fd: int) -> Metering:
    """Metering's counters of the group open as ``meter_fd``."""
    counters = ffi.new("struct fbrt_counters *")
    err = new_error()
    check(lib.fbrt_meter_read(meter_fd, counters, err), err, MeteringError)
    return Metering(
        counters.ingress_bytes,
        counters.ingress_packets,
        counters.egress_bytes,
        counters.egress_packets,
    )


def unpopulated(job: cgroups.JobCgroups) -> bool:
    """Whether no process is left in any of the job's groups (v2: ``cgroup.events``'
    ``populated 0``, which counts the whole subtree; v1: an empty ``cgroup.procs``)."""
    for directory in job.dir_names:
        if directory == job.v2_dir_name:
            if "populated 0" not in cgroups.read_file(directory, "cgroup.events"):
                return False
        elif cgroups.read_file(directory, "cgroup.procs").strip():
            return False
    return True


@dataclass
class KeptGroup:
    """One job's groups, empty, with metering's descriptor of its v2 group (-1: unmetered)."""

    job: cgroups.JobCgroups
    meter_fd: int

    def remove(self) -> None:
        """Remove the groups (their metering goes with them) and close the descriptor."""
        try:
            self.job.remove()
        finally:
            if self.meter_fd >= 0:
                os.close(self.meter_fd)
                self.meter_fd = -1


class KeptGroups:
    """The pool: kept groups by shape, at most :data:`MAX_KEPT`, for this process only (a
    forked child starts with none and never touches its parent's). A full pool lets its least
    recently kept group go for a new one: the keys are owners (or workflows), and an agent
    that outlives its first 64 of them would otherwise hold groups nobody asks for again
    while every newer key's groups were removed."""

    def __init__(self, limit: int = MAX_KEPT) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._pid = current_pid()
        #: each shape's kept groups, oldest first, with the number each was kept under; a
        #: shape with none is not a key (the shapes name owners: they come and go)
        self._groups: dict[Shape, list[tuple[int, KeptGroup]]] = {}
        #: the number each group was kept under -> its shape, in the order they were kept
        self._order: dict[int, Shape] = {}
        #: the number the last group kept was given (they count up: older groups, lower)
        self._last_number = 0

    def _mine(self) -> None:
        # called with the lock held: a forked child drops (without closing or removing) the
        # parent's entries, which stay the parent's to reuse or remove
        if self._pid != current_pid():
            self._pid = current_pid()
            self._groups = {}
            self._order = {}

    def __len__(self) -> int:
        with self._lock:
            self._mine()
            return len(self._order)

    def take(self, shape: Shape) -> KeptGroup | None:
        """A kept group of ``shape`` (most recently kept first), or None."""
        with self._lock:
            self._mine()
            kept = self._groups.get(shape)
            if not kept:
                return None
            number, group = kept.pop()
            if not kept:
                del self._groups[shape]
            del self._order[number]
            return group

    def keep(self, shape: Shape, group: KeptGroup, final: Metering | None) -> KeptGroup | None:
        """Keep ``group`` after its job ended, if it is safe to give to another job (see the
        module docstring); ``final`` is the job's own metering as it ended (None: unmetered).
        Returns the group the caller must remove now: ``group`` itself, untouched, when it
        is not kept; the least recently kept group, out of the pool, when ``group`` took its
        place in a full pool; None when it was kept in a pool with room."""
        if group.meter_fd >= 0 and (final is None or any(final.as_dict().values())):
            return group
        try:
            if not unpopulated(group.job):
                return group
        except RuntimeFailure:
            return group
        with self._lock:
            self._mine()
            evicted = None
            if len(self._order) >= self.limit:
                if self.limit <= 0:
                    return group
                evicted = self._take_oldest()
            self._last_number += 1
            self._groups.setdefault(shape, []).append((self._last_number, group))
            self._order[self._last_number] = shape
        return evicted

    def _take_oldest(self) -> KeptGroup:
        # called with the lock held and the pool not empty: the oldest kept group of all is
        # the first of its shape's, which are kept oldest first
        number, shape = next(iter(self._order.items()))
        kept = self._groups[shape]
        first, group = kept.pop(0)
        assert first == number, "a shape's kept groups are in the order they were kept"
        if not kept:
            del self._groups[shape]
        del self._order[number]
        return group

    def release(self) -> list[str]:
        """Remove every kept group of this process; returns their directories."""
        with self._lock:
            self._mine()
            groups = [group for kept in self._groups.values() for _, group in kept]
            self._groups = {}
            self._order = {}
        removed: list[str] = []
        failures: list[RuntimeFailure] = []
        for group in groups:
            names = list(group.job.dir_names)
            try:
                group.remove()
            except RuntimeFailure as exc:
                failures.append(exc)
                continue
            removed.extend(names)
        if failures:
            raise failures[0]
        return removed


#: this process's kept groups
KEPT = KeptGroups()


def release_kept_cgroups() -> list[str]:
    """Remove the job groups this process kept for later jobs (an agent's stop); returns
    their directories."""
    return KEPT.release()


def reset(group: KeptGroup, spec: ContainerSpec) -> Metering | None:
    """Give ``group`` the limits of ``spec``'s job and read metering's counters at its start
    (None: unmetered). On a failure the groups are removed and the error raised."""
    try:
        group.job.create(
            memory=None,
            cpus=spec.cpus,
            cpuset=spec.cpuset,
            pids=spec.pids_limit,
            need_v2=spec.metering,
        )
        return read_counters(group.meter_fd) if group.meter_fd >= 0 else None
    except BaseException:
        with contextlib.suppress(RuntimeFailure):
            group.remove()
        raise
