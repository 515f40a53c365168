"""A job's volumes on this node: per-workflow directories, and the storage drivers' volumes.

A volume Orchestrate resolved to a :class:`~fuzzball_core.drivers.VolumeLocation` (the
assignment's ``volumes_json``) is the directory its storage driver answers (``hostpath``: the
shared tree; ``local``: beneath the work directory; a site's plugin: wherever it keeps them),
found with :meth:`WorkflowVolumes.locate`.

A volume with no location (an assignment from before storage classes) is a per-workflow
directory: every job of a workflow that mounts volume ``data`` on this node sees the same
directory, ``<work-dir>/workflows/<workflow id>/volumes/data``, bind-mounted at its mount
path, as the ``ephemeral`` driver lays them out. The workflow's directory (its volumes and
its ingress markers) lives until Orchestrate says the workflow ended (``WorkflowEnded``, on
the stream or as the answer to the Hello's list of kept workflows; :meth:`WorkflowVolumes.end`),
then goes once no run of it is left here: a dependent job or egress placed here long after
the workflow's last run on this node still finds what it left. Only while no Orchestrate that
tells workflow ends is connected (an older one, or none for a long time) does the backstop
apply: a directory is removed ``retention`` seconds (``substrate.workflow-volume-retention``,
7 days) after its last run ended and after such an Orchestrate was last connected
(:meth:`WorkflowVolumes.vouch`).

The agent removes them in a worker thread: removing a directory tree is ~0.3-0.4 ms of system
calls a workflow, which at hundreds of separate workflows a second would stall its event loop
for seconds every heartbeat turn. Each is removed holding the lock that ``acquire`` takes,
after checking that no run took the workflow again since it was found due.

The node also counts the runs using each persistent volume (:meth:`WorkflowVolumes.take` as
a run first needs its volumes, :meth:`WorkflowVolumes.let_go` as it ends). Only a run taking a
volume no other run here uses lets the driver change it under the mount
(:meth:`~fuzzball_core.drivers.StorageDriver.fit_capacity`: the ``local`` driver grows its
filesystem to a raised capacity): a container has its volumes bind-mounted in a mount namespace
of its own, so nothing on the host can tell whether a job still writes to one; only the agent,
which started the job, knows. A growth wanted while runs use the volume waits for the next run
that finds it unused.
"""

from __future__ import annotations

import re
import shutil
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from fuzzball_core.drivers import StorageDriver, VolumeLocation
from fuzzball_core.errors import FuzzballError, InvalidArgument
from fuzzball_core.plugins import get_registry

#: Seconds a workflow's volumes outlive its last run on this node when no Orchestrate tells
#: this node that the workflow ended (the backstop: a workflow's dependents may wait for
#: hours behind a long sibling or a full node, and only Orchestrate knows when none is left).
DEFAULT_RETENTION = 7 * 24 * 3600.0

_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")


#: the plugin group of storage drivers
STORAGE_DRIVERS = "fuzzball.storage_drivers"


def installed_driver(name: str) -> StorageDriver:
    """The installed storage driver plugin ``name`` (FailedPrecondition naming it when the
    node lacks it)."""
    driver: StorageDriver = get_registry().driver(STORAGE_DRIVERS, name)
    return driver


def _checked(kind: str, name: str) -> str:
    if not _SAFE_NAME.fullmatch(name) or name in (".", ".."):
        raise InvalidArgument(f"{kind} {name!r}: not a valid directory name")
    return name


class WorkflowVolumes:
    """The node's per-workflow volume directories and their lifetimes.

    ``acquire``/``release`` count the runs of each workflow on this node; ``end`` marks the
    workflows Orchestrate says ended, and ``expire`` removes their directories once no run of
    theirs is left, and, as the backstop, those of workflows idle for longer than
    ``retention`` since an Orchestrate telling workflow ends was last connected
    (``vouch``). Thread-safe.
    """

    def __init__(
        self,
        work_dir: Path,
        *,
        retention: float = DEFAULT_RETENTION,
        drivers: Callable[[str], StorageDriver] = installed_driver,
    ) -> None:
        self.work_dir = work_dir
        self.drivers = drivers
        self.root = work_dir / "workflows"
        self.retention = retention
        self._active: dict[str, int] = {}
        self._idle_since: dict[str, float] = {}
        #: ended workflows with a run still here: removed once their last run is released
        self._ended: set[str] = set()
        #: ended workflows with no run here: removed by the next ``expire`` (a dict: ordered)
        self._due: dict[str, None] = {}
        #: ended workflows an ``expire`` took from ``_due`` and is removing
        self._removing: set[str] = set()
        #: when an Orchestrate that tells this node of workflow ends was last connected: the
        #: backstop counts a workflow's idle time from no earlier than this
        self._vouched = float("-inf")
        self._lock = threading.Lock()
        #: persistent volume id -> the runs on this node using it
        self._users: dict[str, int] = {}
        #: persistent volume id -> held while a run takes it (a first one may resize it)
        self._taking: dict[str, threading.Lock] = {}

    def workflow_dir(self, workflow_id: str) -> Path:
        """The directory holding everything of ``workflow_id`` on this node."""
        return self.root / _checked("workflow id", workflow_id)

    def volume_dir(self, workflow_id: str, volume: str) -> Path:
        """The directory of ``volume`` of ``workflow_id``, created if needed."""
        path = self.workflow_dir(workflow_id) / "volumes" / _checked("volume", volume)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def locate(self, workflow_id: str, volume: str, location: VolumeLocation | None) -> Path:
        """The host directory of the job's ``volume``: its storage driver's for a resolved
        ``location`` (created if new, with the class's ``permissions`` mode when it gives
        one), else the workflow's own directory here."""
        if location is None:
            return self.volume_dir(workflow_id, volume)
        if not location.volume_id and location.workflow_id != workflow_id:
            raise InvalidArgument(
                f"volume {volume}: its location belongs to workflow {location.workflow_id}"
            )
        path = self.drivers(location.driver).directory(location, work_dir=self.work_dir)
        mode = location.parameters.get("permissions")
        if mode:
            path.chmod(int(mode, 8))
        return path

    def persistent_directories(self, locations: Mapping[str, VolumeLocation]) -> dict[str, Path]:
        """``{volume id: directory}`` of the persistent volumes among ``locations`` (a run's:
        their directories exist, the run mounted them)."""
        found = {}
        for location in locations.values():
            if not location.persistent:
                continue
            try:
                path = self.drivers(location.driver).directory(location, work_dir=self.work_dir)
            except (FuzzballError, OSError):  # a driver this node lacks: not measured
                continue
            found[location.volume_id] = path
        return found

    def remove(self, location: VolumeLocation) -> None:
        """Delete a deleted volume's data on this node with its storage driver."""
        self.drivers(location.driver).remove(location, work_dir=self.work_dir)

    def take(self, locations: Iterable[VolumeLocation]) -> list[VolumeLocation]:
        """A run starts using the persistent volumes among ``locations``; those it took, to
        :meth:`let_go` when it ends. A volume no other run here uses is first fitted to its
        class's capacity by its driver (a second run taking it meanwhile waits for that). On
        an error (the driver's, naming the volume) the run holds none of them."""
        taken: list[VolumeLocation] = []
        try:
            for location in locations:
                if location.persistent:
                    self._take_one(location)
                    taken.append(location)
        except BaseException:
            self.let_go(taken)
            raise
        return taken

    def let_go(self, locations: Iterable[VolumeLocation]) -> None:
        """A run that took ``locations`` (:meth:`take`'s answer) no longer uses them."""
        with self._lock:
            for location in locations:
                left = self._users.get(location.volume_id, 0) - 1
                if left > 0:
                    self._users[location.volume_id] = left
                else:
                    self._users.pop(location.volume_id, None)

    def users(self, volume_id: str) -> int:
        """How many runs on this node use the persistent volume ``volume_id`` now."""
        with self._lock:
            return self._users.get(volume_id, 0)

    def _take_one(self, location: VolumeLocation) -> None:
        with self._lock:
            taking = self._taking.setdefault(location.volume_id, threading.Lock())
        with taking:
            if self.users(location.volume_id) == 0:
                driver = self.drivers(location.driver)
                driver.fit_capacity(location, work_dir=self.work_dir)
            with self._lock:
                self._users[location.volume_id] = self._users.get(location.volume_id, 0) + 1

    def acquire(self, workflow_id: str) -> None:
        """A run of ``workflow_id`` starts here: keep its directories."""
        with self._lock:
            self._active[workflow_id] = self._active.get(workflow_id, 0) + 1
            self._idle_since.pop(workflow_id, None)
            if workflow_id in self._due or workflow_id in self._removing:
                # said ended (a canceled run starting late): goes once this run is released
                self._due.pop(workflow_id, None)
                self._ended.add(workflow_id)

    def release(self, workflow_id: str, now: float) -> None:
        """A run of ``workflow_id`` ended here at ``now``."""
        with self._lock:
            left = self._active.get(workflow_id, 0) - 1
            if left > 0:
                self._active[workflow_id] = left
                return
            self._active.pop(workflow_id, None)
            if workflow_id in self._ended:
                self._ended.discard(workflow_id)
                self._due[workflow_id] = None
                return
            # re-inserted at the end: the idle workflows stay in the order they went idle,
            # which lets expire() stop at the first one not yet due
            self._idle_since.pop(workflow_id, None)
            self._idle_since[workflow_id] = now

    def end(self, workflow_ids: Iterable[str]) -> None:
        """Orchestrate says these workflows ended: their directories go at the next
        ``expire``, or, for one with a run still here (its container being stopped), once
        that run is released. Names that are not workflow ids are ignored (nothing of
        theirs can be here)."""
        with self._lock:
            for workflow_id in workflow_ids:
                if not _SAFE_NAME.fullmatch(workflow_id) or workflow_id in (".", ".."):
                    continue
                if workflow_id in self._active:
                    self._ended.add(workflow_id)
                    continue
                self._idle_since.pop(workflow_id, None)
                self._due[workflow_id] = None

    def vouch(self, now: float) -> None:
        """An Orchestrate that tells this node of workflow ends is connected at ``now``: it
        will say when each kept workflow ends, so the backstop removes none before ``now +
        retention``."""
        with self._lock:
            self._vouched = max(self._vouched, now)

    def kept(self, limit: int) -> list[str]:
        """The workflows whose directories this node keeps (those with runs here first, then
        the idle ones in the order they went idle), at most ``limit``: what the Hello asks
        Orchestrate about."""
        with self._lock:
            return [*self._active, *self._idle_since][:limit]

    def expire(self, now: float) -> list[str]:
        """Remove the directories of the workflows Orchestrate said ended, then those idle
        since before ``now - retention`` (and before the last ``vouch``); the workflows
        removed.

        Blocking (a directory tree a workflow): the agent calls it in a worker thread. A
        workflow acquired again after it was found due keeps its directory: each is removed
        holding the lock, so a run's ``acquire`` waits for at most one removal and the
        directory it then makes is its own. Idle workflows are looked at in the order they
        went idle, up to the first not yet due (a clock set back delays later ones; none goes
        early).
        """
        due = self._take_due(now)
        removed = []
        for workflow_id in due:
            with self._lock:
                self._removing.discard(workflow_id)
                if (
                    workflow_id in self._active
                    or workflow_id in self._idle_since
                    or workflow_id in self._due
                ):
                    continue  # a run took it again: it lives on (until told, if ended)
                shutil.rmtree(self.workflow_dir(workflow_id), ignore_errors=True)
            removed.append(workflow_id)
        return removed

    def _take_due(self, now: float) -> list[str]:
        """The workflows due for removal at ``now``, no longer counted as idle or ended."""
        with self._lock:
            due = list(self._due)
            self._removing.update(due)
            self._due.clear()
            idle = []
            for workflow_id, since in self._idle_since.items():
                if now - max(since, self._vouched) < self.retention:
                    break
                idle.append(workflow_id)
            for workflow_id in idle:
                del self._idle_since[workflow_id]
        return due + idle

    def adopt_leftovers(self, now: float) -> list[str]:
        """At start-up: directories of workflows no run of this agent uses any more.

        A restarted agent no longer knows when their runs ended, so it starts their backstop
        retention from now rather than deleting what a dependent job may still need; its
        Hello names them (:meth:`kept`) and Orchestrate says which ended.
        """
        if not self.root.is_dir():
            return []
        found = [entry.name for entry in self.root.iterdir() if entry.is_dir()]
        with self._lock:
            for workflow_id in found:
                if workflow_id not in self._active:
                    self._idle_since.setdefault(workflow_id, now)
        return found
