"""Per-job cgroups on cgroup v2 and on hybrid hosts (v1 controllers + v2 at .../unified).

Policy lives here (which files get which values); the file operations themselves are the C
calls in ``csrc/cgroup.c`` so that every failure names the file and the errno.
"""

from __future__ import annotations

import contextlib
import errno
import os
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from .errors import RuntimeFailure
from .native import check, ffi, lib, new_error

V1_CONTROLLERS = ("memory", "cpu", "cpuset", "pids")
CPU_PERIOD_US = 100_000


@dataclass(frozen=True)
class CgroupLayout:
    """Where the hierarchies are mounted on this host."""

    #: root of the cgroup v2 hierarchy (None when there is none)
    unified: Path | None
    #: v1 controller -> its hierarchy's root; empty on a pure v2 host
    v1: dict[str, Path] = field(default_factory=dict)

    @property
    def hybrid(self) -> bool:
        """v1 controllers with a v2 tree alongside (or pure v1)."""
        return bool(self.v1)


@cache
def detect_layout() -> CgroupLayout:
    """Read /proc/self/mounts once and find the cgroup hierarchies."""
    unified: Path | None = None
    v1: dict[str, Path] = {}
    with open("/proc/self/mounts") as mounts:
        for line in mounts:
            _, target, fstype, options, *_ = line.split()
            if fstype == "cgroup2":
                unified = Path(target)
            elif fstype == "cgroup":
                for controller in options.split(","):
                    if controller in V1_CONTROLLERS:
                        v1[controller] = Path(target)
    return CgroupLayout(unified, v1)


def supports_cpusets(layout: CgroupLayout) -> bool:
    """Whether jobs can be given cpusets here: the v1 ``cpuset`` controller is mounted, or the
    v2 root offers ``cpuset`` to its children (a delegated tree may not)."""
    if layout.v1:
        return "cpuset" in layout.v1
    if layout.unified is None:
        return False
    try:
        return "cpuset" in _read(layout.unified, "cgroup.controllers").split()
    except RuntimeFailure:
        return False


def _write(directory: str | Path, name: str, value: str) -> None:
    err = new_error()
    check(lib.fbrt_cgroup_write(os.fsencode(directory), name.encode(), value.encode(), err), err)


def _read(directory: str | Path, name: str) -> str:
    err = new_error()
    buf = ffi.new("char[]", 4096)
    n = check(lib.fbrt_cgroup_read(os.fsencode(directory), name.encode(), buf, 4096, err), err)
    return ffi.unpack(buf, n).decode()


def read_file(directory: str | Path, name: str) -> str:
    """The text of the control file ``name`` of the group ``directory`` (up to 4 KiB)."""
    return _read(directory, name)


def _mkdir(directory: str | Path) -> None:
    err = new_error()
    check(lib.fbrt_cgroup_create(os.fsencode(directory), err), err)


def _counter(text: str, key: str) -> int:
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return int(value)
    return 0


@dataclass
class CgroupJoin:
    """How a container's child joins its job's groups (``fbrt_cgroup_open_join``): each v1
    group's ``tasks`` file, written by the child, and the v2 group's directory, which the
    child is cloned into. Both spare it a write to ``cgroup.procs``, whose lock waits for an
    RCU grace period when no other start took it just before."""

    #: the v1 groups' ``tasks`` files, open for writing
    tasks: list[int] = field(default_factory=list)
    #: the v2 group's directory (-1: none)
    v2: int = -1
    #: whether :meth:`close` closes ``v2`` (not when it is another owner's descriptor)
    owns_v2: bool = True

    def close(self) -> None:
        """Close the descriptors it owns (the child holds what it needs once started)."""
        for fd in [*self.tasks, self.v2 if self.owns_v2 else -1]:
            if fd >= 0:
                os.close(fd)
        self.tasks, self.v2 = [], -1


#: the parent groups this process made ready for jobs, as (directory, the v2 controllers
#: enabled for its children, a v1 cpuset): each job's group is then one mkdir. Checking
#: and preparing the parent at every start was a stat, and on a v2 host a read of the
#: root's controllers and a write of its subtree_control too. A parent removed since (the
#: sweep removes those without jobs) is made again when a job's mkdir finds it missing.
_PREPARED_PARENTS: set[tuple[str, str, bool]] = set()
#: the controllers this process enabled for the children of each v2 root ("+memory +cpu")
_ROOT_CONTROLLERS: dict[Path, str] = {}


class JobCgroups:
    """The cgroups of one job: created with their limits, joined by the child, removed.

    The directories are kept as text and given out as paths (:attr:`dirs`, :attr:`v2_dir`,
    :attr:`memory_dir`): a job's groups are made, opened and removed by their names alone,
    and pathlib's joins, hashes, comparisons and conversions of them were about 30 us of a
    start's and release's CPU, more than the system calls they named."""

    def __init__(self, layout: CgroupLayout, group: str, job_id: str) -> None:
        self.layout = layout
        self.group = group
        self.job_id = job_id
        #: every directory created, deepest last (removal goes in that order)
        self.dir_names: list[str] = []
        #: the group whose memory events tell an OOM kill (None: no memory limit)
        self.memory_dir_name: str | None = None
        #: the v2 group: metering's, and the one the child is cloned into
        self.v2_dir_name: str | None = None

    @property
    def dirs(self) -> list[Path]:
        """Every directory created, deepest last."""
        return [Path(name) for name in self.dir_names]

    @property
    def memory_dir(self) -> Path | None:
        """The group holding the memory limit, if any."""
        return None if self.memory_dir_name is None else Path(self.memory_dir_name)

    @property
    def v2_dir(self) -> Path | None:
        """The job's cgroup v2 group, if any."""
        return None if self.v2_dir_name is None else Path(self.v2_dir_name)

    def _job_dir(self, root: Path, *, v2_controllers: str = "", v1_cpuset: bool = False) -> str:
        parent = os.path.join(os.fspath(root), self.group)
        prepared = (parent, v2_controllers, v1_cpuset)
        if prepared not in _PREPARED_PARENTS:
            self._prepare_parent(root, Path(parent), v2_controllers, v1_cpuset)
            _PREPARED_PARENTS.add(prepared)
        job = f"{parent}/{self.job_id}"
        if job not in self.dir_names:
            try:
                _mkdir(job)
            except RuntimeFailure as exc:
                if exc.errno != errno.ENOENT:
                    raise
                # the parent was removed since (a sweep found it without jobs): made again
                _PREPARED_PARENTS.discard(prepared)
                self._prepare_parent(root, Path(parent), v2_controllers, v1_cpuset)
                _PREPARED_PARENTS.add(prepared)
                _mkdir(job)
            self.dir_names.append(job)
        return job

    @staticmethod
    def _prepare_parent(root: Path, parent: Path, v2_controllers: str, v1_cpuset: bool) -> None:
        """Make the state directory's parent group under ``root`` usable for jobs."""
        if not parent.is_dir():
            _mkdir(parent)
            if v2_controllers:
                _write(parent, "cgroup.subtree_control", v2_controllers)
        if v1_cpuset and not _read(parent, "cpuset.mems").strip():
            # A v1 cpuset group is unusable until it has cpus and mems.
            for name in ("cpuset.cpus", "cpuset.mems"):
                _write(parent, name, _read(root, name).strip() or "0")

    def create(
        self,
        *,
        memory: int | None,
        cpus: float | None,
        cpuset: str | None,
        pids: int | None,
        need_v2: bool,
    ) -> None:
        """Create the job's groups with these limits (None leaves a resource unlimited)."""
        try:
            if self.layout.hybrid:
                self._create_v1(memory, cpus, cpuset, pids)
                if need_v2 and self.layout.unified is not None:
                    self.v2_dir_name = self._job_dir(self.layout.unified)
            else:
                self._create_v2(memory, cpus, cpuset, pids)
        except BaseException:
            self.remove()
            raise

    def _create_v1(
        self, memory: int | None, cpus: float | None, cpuset: str | None, pids: int | None
    ) -> None:
        v1 = self.layout.v1
        if memory is not None:
            job = self._job_dir(v1["memory"])
            _write(job, "memory.limit_in_bytes", str(memory))
            if os.path.exists(f"{job}/memory.memsw.limit_in_bytes"):
                # Without this, swap lets the job live past its limit instead of being killed.
                _write(job, "memory.memsw.limit_in_bytes", str(memory))
            self.memory_dir_name = job
        if cpus is not None:
            job = self._job_dir(v1["cpu"])
            _write(job, "cpu.cfs_period_us", str(CPU_PERIOD_US))
            _write(job, "cpu.cfs_quota_us", str(int(cpus * CPU_PERIOD_US)))
        if cpuset is not None:
            job = self._job_dir(v1["cpuset"], v1_cpuset=True)
            _write(job, "cpuset.cpus", cpuset)
            _write(job, "cpuset.mems", _read(os.path.dirname(job), "cpuset.mems").strip() or "0")
        if pids is not None:
            job = self._job_dir(v1["pids"])
            _write(job, "pids.max", str(pids))

    def _create_v2(
        self, memory: int | None, cpus: float | None, cpuset: str | None, pids: int | None
    ) -> None:
        root = self.layout.unified
        if root is None:
            raise FileNotFoundError("no cgroup hierarchy is mounted")
        controllers = _ROOT_CONTROLLERS.get(root)
        if controllers is None:
            available = _read(root, "cgroup.controllers").split()
            wanted = [c for c in ("memory", "cpu", "cpuset", "pids") if c in available]
            controllers = " ".join("+" + c for c in wanted)
            with contextlib.suppress(Exception):
                _write(root, "cgroup.subtree_control", controllers)
            _ROOT_CONTROLLERS[root] = controllers
        job = self._job_dir(root, v2_controllers=controllers)
        self.v2_dir_name = job
        if memory is not None:
            _write(job, "memory.max", str(memory))
            if os.path.exists(f"{job}/memory.swap.max"):
                _write(job, "memory.swap.max", "0")
            self.memory_dir_name = job
        if cpus is not None:
            _write(job, "cpu.max", f"{int(cpus * CPU_PERIOD_US)} {CPU_PERIOD_US}")
        if cpuset is not None:
            _write(job, "cpuset.cpus", cpuset)
        if pids is not None:
            _write(job, "pids.max", str(pids))

    def open_join(self, v2_fd: int = -1) -> CgroupJoin:
        """The descriptors the child joins the groups by (:class:`CgroupJoin`).

        ``v2_fd``, when given (>= 0), is the v2 group's directory already open for reading
        (metering's descriptor): the join uses it instead of opening another, and leaves
        closing it to its owner."""
        tasks: list[int] = []
        v2 = -1
        try:
            for directory in self.dir_names:
                v1 = directory != self.v2_dir_name
                if not v1 and v2_fd >= 0:
                    continue
                err = new_error()
                fd = check(lib.fbrt_cgroup_open_join(os.fsencode(directory), int(v1), err), err)
                if v1:
                    tasks.append(fd)
                else:
                    v2 = fd
        except BaseException:
            CgroupJoin(tasks, v2).close()
            raise
        if v2_fd >= 0 and self.v2_dir_name is not None:
            return CgroupJoin(tasks, v2_fd, owns_v2=False)
        return CgroupJoin(tasks, v2)

    def oom_killed(self) -> bool:
        """Whether the kernel OOM-killed anything in the job's memory group."""
        if self.memory_dir_name is None:
            return False
        with contextlib.suppress(Exception):
            if self.layout.hybrid:
                return _counter(_read(self.memory_dir_name, "memory.oom_control"), "oom_kill") > 0
            return _counter(_read(self.memory_dir_name, "memory.events"), "oom_kill") > 0
        return False

    def remove(self) -> None:
        """Kill what is left in the groups and remove them (missing ones are fine)."""
        failures: list[Exception] = []
        for directory in reversed(self.dir_names):
            try:
                remove_dir(directory)
            except Exception as exc:
                failures.append(exc)
        self.dir_names.clear()
        if failures:
            raise failures[0]


def remove_dir(directory: str | Path, timeout_ms: int = 2000) -> None:
    """Remove one cgroup directory, killing its remaining members."""
    err = new_error()
    check(lib.fbrt_cgroup_remove(os.fsencode(directory), timeout_ms, err), err)


def job_dirs(layout: CgroupLayout, group: str) -> list[Path]:
    """Every job directory under ``group`` in every hierarchy (for the sweep)."""
    roots = list(layout.v1.values()) + ([layout.unified] if layout.unified else [])
    found: list[Path] = []
    for root in dict.fromkeys(roots):
        parent = root / group
        if parent.is_dir():
            found.extend(p for p in parent.iterdir() if p.is_dir())
    return found


def remove_group_parents(layout: CgroupLayout, group: str) -> list[Path]:
    """Remove the per-state-directory parent groups that no longer hold any job."""
    roots = list(layout.v1.values()) + ([layout.unified] if layout.unified else [])
    removed: list[Path] = []
    for root in dict.fromkeys(roots):
        parent = root / group
        if parent.is_dir() and not any(p.is_dir() for p in parent.iterdir()):
            remove_dir(parent)
            removed.append(parent)
            for prepared in [p for p in list(_PREPARED_PARENTS) if p[0] == str(parent)]:
                _PREPARED_PARENTS.discard(prepared)
    return removed
