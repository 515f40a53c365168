"""The node state directory: shared image mounts, their references, and container records.

Layout under the state directory (default ``/run/fuzzball-runtime``)::

    images/<key>/            the image's EROFS mount, shared read-only by its containers
    images/<key>.refs/<id>   one file per holder of that mount (the reference count): a
                             process whose containers use it (``process-<pid>-<start>-<n>``,
                             one however many containers), or another holder's id
    images/<key>.lock        flock serialising mount/unmount decisions across agents
    containers/<holder>.records  what the running containers of one process hold, for the
                             start-up sweep: a journal, one line per start and one per end,
                             deleted at the process's exit once every container ended
                             (``containers/<id>.json``, one file per container, from older
                             runtimes, is still read)
    work/                    where each container's PID 1 mounts its private tmpfs
    network/addresses/<ip>   an isolated job's address, naming its container
    network/lock             flock serialising the network's set-up and release

An image's key is derived from the identity of its file (device, inode, size, mtime): the
image cache names files by content digest, so one key is one image.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import itertools
import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from .native import check, ffi, lib, new_error


@dataclass
class ContainerRecord:
    """What the sweep needs to free a container whose agent died."""

    id: str
    pid: int
    pid_start: int
    agent_pid: int
    agent_start: int
    image_key: str
    cgroups: list[str] = field(default_factory=list)


#: this process's pid, kept by the fork hook below: asked for about ten times per container
#: (the per-process init, template, lifeline, devnull, holds and journal are each checked
#: against a fork), and ``os.getpid`` is a system call each time
_PID = os.getpid()


def _forked() -> None:
    global _PID
    _PID = os.getpid()


os.register_at_fork(after_in_child=_forked)


def current_pid() -> int:
    """This process's pid, without a system call (updated in a child after ``os.fork``)."""
    return _PID


def _stat_fields(pid: int) -> list[bytes] | None:
    # os.open/os.read: a buffered file object adds four system calls (fstat, ioctl, two
    # lseek) to each of the two reads per container.
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        data = os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)
    # The command name may contain spaces and parentheses: fields start after the last ')'.
    return data[data.rindex(b")") + 2 :].split()


def process_start_time(pid: int) -> int | None:
    """The start time (clock ticks since boot) of ``pid``, or None when it is gone."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else None


#: prefix of the reference a process holds on an image mount for its containers
PROCESS_HOLDER_PREFIX = "process-"
#: distinguishes the StateDir objects of one process (each holds references of its own)
_HOLDER_SERIAL = itertools.count()


def holder_process(holder: str) -> tuple[int, int] | None:
    """(pid, start time) of the process whose reference ``holder`` names, or None when
    ``holder`` is not a process's reference (a container id, say)."""
    if not holder.startswith(PROCESS_HOLDER_PREFIX):
        return None
    parts = holder[len(PROCESS_HOLDER_PREFIX) :].split("-")
    if len(parts) != 3 or not all(part.isdigit() for part in parts):
        return None
    return int(parts[0]), int(parts[1])


def is_alive(pid: int, start: int) -> bool:
    """Whether the process ``pid`` that started at ``start`` still runs (not a reused pid,
    not a zombie waiting for its reaper)."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] != b"Z" and int(fields[19]) == start


#: seconds a process's exit waits for its records' lock before it leaves its journal be
_EXIT_LOCK_WAIT = 2.0


class StateDir:
    """One node state directory; see the module docstring for its layout."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.images = self.root / "images"
        self.containers = self.root / "containers"
        self.work = self.root / "work"
        # The same as strings: every container start and exit builds a few paths under
        # them, and pathlib's joins and conversions were a third of the agent's own Python.
        self._images = os.fspath(self.images)
        self._containers = os.fspath(self.containers)
        # This process's holds on image mounts for its containers: key -> containers using
        # it. Only the first takes a reference on disk and only the last drops it (under
        # ``_holder``): see hold_image.
        self._holds: dict[str, int] = {}
        self._holds_lock = threading.Lock()
        self._holds_pid = 0
        self._holder = ""
        # This process's journal of container records (see write_record): its descriptor
        # (-1 until the first record), the live records' lines, and the lines written.
        self._journal_fd = -1
        self._journal_live: dict[str, bytes] = {}
        self._journal_lines = 0
        self._tag: str | None = None

    def ensure(self) -> StateDir:
        """Create the directories (cheap when they exist)."""
        if not self.work.is_dir():
            for path in (self.images, self.containers, self.work):
                path.mkdir(parents=True, exist_ok=True, mode=0o700)
        return self

    @property
    def tag(self) -> str:
        """A short digest of this directory's resolved path: it names what this directory's
        jobs hold outside it (cgroups, the network's bridge, table and namespaces), so that
        each agent's sweep finds its own and only its own."""
        # Resolved once: every job's cgroups are named by it, and resolving (an lstat per
        # component of the path) and hashing cost about 27 us per container start.
        if self._tag is None:
            self._tag = hashlib.sha256(str(self.root.resolve()).encode()).hexdigest()[:8]
        return self._tag

    @property
    def cgroup_group(self) -> str:
        """Name of the parent cgroup of this state directory's jobs."""
        return "fuzzball-runtime-" + self.tag

    # ---- images -------------------------------------------------------------------------

    @staticmethod
    def image_key(image: str | os.PathLike[str]) -> str:
        """The key under which the image's shared mount lives."""
        st = os.stat(image)
        identity = f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{os.fspath(image)}"
        return hashlib.sha256(identity.encode()).hexdigest()[:20]

    def _lock_image(self, key: str) -> int:
        """Take the image's lock (flock on its lock file); returns the descriptor to close."""
        fd = os.open(f"{self._images}/{key}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def hold_image(self, image: str | os.PathLike[str]) -> tuple[str, str]:
        """Take a hold on the image's shared mount for one container of this process; returns
        its key and mount point. Thread-safe; give it back with :meth:`unhold_image`.

        The first hold takes this process's reference on disk (:meth:`acquire_image`, which
        mounts the image if nobody holds it); the others only count here. A reference and
        its lock per container were a third of the agent's file operations per start; the
        start-up sweep tells a dead process's reference by the pid and start time in its
        name (:func:`holder_process`)."""
        image = os.path.abspath(image)
        key = self.image_key(image)
        with self._holds_lock:
            self._own_holds()
            count = self._holds.get(key, 0)
            if count == 0:
                self._acquire(key, image, self._holder)
            self._holds[key] = count + 1
        return key, f"{self._images}/{key}"

    def unhold_image(self, key: str) -> None:
        """Give back a hold of :meth:`hold_image`; the process's last one on the image drops
        its reference (:meth:`release_image`: the last reference unmounts)."""
        with self._holds_lock:
            self._own_holds()
            count = self._holds.pop(key, 0)
            if count > 1:
                self._holds[key] = count - 1
                return
            self.release_image(key, self._holder)

    def _own_holds(self) -> None:
        """Forget holds and records inherited through fork (they are the parent's) and name
        this process's reference and journal; called with ``_holds_lock`` held."""
        pid = current_pid()
        if self._holds_pid != pid:
            self._holds = {}
            if self._journal_fd >= 0:
                os.close(self._journal_fd)  # the parent's journal: ours is a new file
            self._journal_fd = -1
            self._journal_live = {}
            self._journal_lines = 0
            self._holds_pid = pid
            start = process_start_time(pid) or 0
            self._holder = f"{PROCESS_HOLDER_PREFIX}{pid}-{start}-{next(_HOLDER_SERIAL)}"

    def acquire_image(self, image: str | os.PathLike[str], holder: str) -> tuple[str, Path]:
        """Take ``holder``'s reference on the image's shared mount, mounting it if it is the
        first."""
        image = os.path.abspath(image)
        key = self.image_key(image)
        self._acquire(key, image, holder)
        return key, Path(f"{self._images}/{key}")

    def _acquire(self, key: str, image: str, holder: str) -> None:
        mountpoint = f"{self._images}/{key}"
        refs = f"{mountpoint}.refs"
        lock = self._lock_image(key)
        try:
            with contextlib.suppress(FileExistsError):
                os.mkdir(refs)
            ref = f"{refs}/{holder}"
            os.close(os.open(ref, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
            if not self._is_mounted(mountpoint):
                try:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(mountpoint)
                    err = new_error()
                    loopdev = ffi.new("char[]", 64)
                    check(
                        lib.fbrt_image_mount(
                            os.fsencode(image), os.fsencode(mountpoint), loopdev, 64, err
                        ),
                        err,
                    )
                except BaseException:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(ref)
                    self._drop_unreferenced(key)
                    raise
        finally:
            os.close(lock)

    def release_image(self, key: str, holder: str) -> None:
        """Drop ``holder``'s reference; the last one unmounts (the loop device detaches
        itself)."""
        lock = self._lock_image(key)
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self._images}/{key}.refs/{holder}")
            self._drop_unreferenced(key)
        finally:
            os.close(lock)

    def _is_mounted(self, mountpoint: str) -> bool:
        """``os.path.ismount`` for a directory directly under ``images``, whose parent needs
        no resolving (ismount's realpath costs an lstat per component of the path)."""
        try:
            inside = os.lstat(mountpoint)
        except FileNotFoundError:
            return False
        parent = os.lstat(self._images)
        return inside.st_dev != parent.st_dev or inside.st_ino == parent.st_ino

    def _drop_unreferenced(self, key: str) -> None:
        mountpoint = f"{self._images}/{key}"
        refs = f"{mountpoint}.refs"
        try:
            with os.scandir(refs) as entries:
                if next(entries, None) is not None:
                    return
        except (FileNotFoundError, NotADirectoryError):
            pass
        err = new_error()
        check(lib.fbrt_umount(os.fsencode(mountpoint), 0, err), err)
        for path in (mountpoint, refs):
            with contextlib.suppress(FileNotFoundError):
                os.rmdir(path)

    def image_keys(self) -> list[str]:
        """Keys of every image with a mount or references here."""
        if not self.images.is_dir():
            return []
        return sorted(
            {p.name.split(".")[0] for p in self.images.iterdir() if not p.name.endswith(".lock")}
        )

    def image_refs(self, key: str) -> list[str]:
        """Holders of a reference on the image ``key`` (processes, other holders' ids)."""
        refs = self.images / f"{key}.refs"
        return sorted(p.name for p in refs.iterdir()) if refs.is_dir() else []

    # ---- container records --------------------------------------------------------------

    #: ended lines a journal may hold before it is rewritten with its live records only
    JOURNAL_SLACK = 4096

    def write_record(self, record: ContainerRecord) -> None:
        """Persist what a container of this process holds: one line appended to the
        process's journal (``containers/<holder>.records``), the container's JSON after a
        ``+``. A file per container (created, written, renamed, unlinked) was a fifth of the
        agent's CPU per start; an append is one system call and never leaves half a record
        behind a whole one (:meth:`records` skips a last line without its newline)."""
        # vars(), not asdict(): the fields are plain values and asdict deep-copies them.
        line = b"+" + json.dumps(vars(record)).encode() + b"\n"
        with self._holds_lock:
            self._own_holds()
            if self._journal_fd < 0:
                self._journal_fd = os.open(
                    f"{self._containers}/{self._holder}.records",
                    os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC,
                    0o600,
                )
                atexit.register(self._drop_ended_journal, self._holds_pid, self._holder)
            os.write(self._journal_fd, line)
            self._journal_live[record.id] = line
            self._journal_lines += 1

    def remove_record(self, container_id: str) -> None:
        """Forget a container that has been fully released: a ``-<id>`` line in this
        process's journal, or the file of an older runtime's record."""
        with self._holds_lock:
            self._own_holds()
            if self._journal_live.pop(container_id, None) is not None:
                os.write(self._journal_fd, f"-{container_id}\n".encode())
                self._journal_lines += 1
                if self._journal_lines > self.JOURNAL_SLACK + 2 * len(self._journal_live):
                    self._compact_journal()
                return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{self._containers}/{container_id}.json")

    def _drop_ended_journal(self, pid: int, holder: str) -> None:
        """At the exit of the process that wrote the journal ``holder``: delete it when
        every container it recorded has ended (a one-shot ``fuzzball-runtime run`` left one
        file behind per run until a sweep); one naming a live container stays for the
        sweep. A forked child exiting normally runs its parent's handlers: not its journal."""
        # a thread stuck holding the lock (a mount under way as the process is told to
        # exit) leaves the journal to the sweep rather than hanging the exit
        if current_pid() != pid or not self._holds_lock.acquire(timeout=_EXIT_LOCK_WAIT):
            return
        try:
            if self._holds_pid != pid or self._holder != holder or self._journal_live:
                return
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self._containers}/{holder}.records")
            if self._journal_fd >= 0:
                os.close(self._journal_fd)
                self._journal_fd = -1
        finally:
            self._holds_lock.release()

    def _compact_journal(self) -> None:
        """Rewrite this process's journal with its live records only (atomically: a sweep
        reading it meanwhile sees the old file or the new one); ``_holds_lock`` held."""
        path = f"{self._containers}/{self._holder}.records"
        if not self._journal_live:
            os.ftruncate(self._journal_fd, 0)  # appends go on at the new end
        else:
            tmp = f"{path}.tmp"
            fd = os.open(
                tmp, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600
            )
            os.write(fd, b"".join(self._journal_live.values()))
            os.rename(tmp, path)
            os.close(self._journal_fd)
            self._journal_fd = fd
        self._journal_lines = len(self._journal_live)

    @staticmethod
    def _journal_records(text: bytes) -> list[ContainerRecord]:
        """The records a journal's lines leave started (a torn last line is skipped)."""
        live: dict[str, ContainerRecord] = {}
        for line in text.split(b"\n")[:-1]:
            if line.startswith(b"+"):
                with contextlib.suppress(ValueError, TypeError):
                    record = ContainerRecord(**json.loads(line[1:]))
                    live[record.id] = record
            elif line.startswith(b"-"):
                live.pop(line[1:].decode(errors="replace"), None)
        return list(live.values())

    def records(self) -> list[ContainerRecord]:
        """Every container record present: the journals' started and not ended records, and
        older runtimes' record files (unreadable ones are skipped and removed)."""
        found: list[ContainerRecord] = []
        if not self.containers.is_dir():
            return found
        for path in sorted(self.containers.glob("*.records")):
            with contextlib.suppress(OSError):
                found.extend(self._journal_records(path.read_bytes()))
        for path in sorted(self.containers.glob("*.json")):
            try:
                found.append(ContainerRecord(**json.loads(path.read_text())))
            except (OSError, ValueError, TypeError):
                path.unlink(missing_ok=True)
        return found

    def remove_dead_journals(self) -> list[str]:
        """Delete the journals of processes that are gone (the sweep has freed what their
        records named); returns their names."""
        removed: list[str] = []
        if not self.containers.is_dir():
            return removed
        # A journal, or the copy a compaction left when its process died before the rename.
        for path in self.containers.glob("*.records*"):
            process = holder_process(path.name.split(".records")[0])
            if process is not None and not is_alive(*process):
                path.unlink(missing_ok=True)
                removed.append(path.name)
        return removed
