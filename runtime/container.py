"""Start, watch and release one container: the Python face of ``csrc/start.c`` and the init."""

from __future__ import annotations

import contextlib
import os
import random
import select
import signal
import threading
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from . import capabilities, cgroups, kept
from .errors import ContainerStartError, MeteringError, RuntimeFailure, RuntimeWarningMessage
from .guard import attach_metadata_guard
from .native import INIT_PATH, check, ffi, lib, new_error
from .network import Attachment, NodeNetwork, resolv_conf_for_isolated
from .spec import DEVNULL, PIPE, ContainerSpec, ExitStatus, Metering, StreamTarget
from .state import ContainerRecord, StateDir, current_pid, process_start_time
from .users import home_in_image

_AGENT: tuple[int, int] | None = None  # (pid, start time) of this process
_LIFELINE: tuple[int, int] | None = None  # (owning pid, read end)
_INIT: tuple[int, int] | None = None  # (owning pid, sealed memfd of the init)
_INIT_LOCK = threading.Lock()
_MNT_TEMPLATE: tuple[int, int] | None = None  # (owning pid, the template's namespace)
#: StateDir per state directory as given: one object per directory, not per container
_STATE_DIRS: dict[str | os.PathLike[str], StateDir] = {}


def _init_fd() -> int:
    """The container init (``fbrt-init``) in a sealed memfd, made once per process: PID 1 of
    every container is executed from it (``fbrt_init_open`` in ``csrc/start.c``)."""
    global _INIT
    with _INIT_LOCK:
        if _INIT is None or _INIT[0] != current_pid():
            err = new_error()
            fd = check(lib.fbrt_init_open(os.fsencode(INIT_PATH), err), err, ContainerStartError)
            _INIT = (current_pid(), fd)
        return _INIT[1]


def _mnt_template_fd(state: StateDir) -> int:
    """The template mount namespace (``fbrt_mnt_template_open``), made once per process: the
    child of every container copies it instead of the host's mount table. Its tmpfs is
    mounted on the state directory's ``work`` inside that namespace only."""
    global _MNT_TEMPLATE
    with _INIT_LOCK:
        if _MNT_TEMPLATE is None or _MNT_TEMPLATE[0] != current_pid():
            err = new_error()
            fd = check(
                lib.fbrt_mnt_template_open(os.fsencode(state.work), err), err, ContainerStartError
            )
            _MNT_TEMPLATE = (current_pid(), fd)
        return _MNT_TEMPLATE[1]


def _lifeline() -> int:
    """Read end of this agent's lifeline pipe: PID 1 of every container started here
    watches it and ends the job when it reads EOF, i.e. when the agent has died.

    The write end is never written and never closed while the agent lives. A forked child
    makes its own, so that its containers follow its life, not its parent's."""
    global _LIFELINE
    if _LIFELINE is None or _LIFELINE[0] != current_pid():
        read_end, _write_end = os.pipe()
        _LIFELINE = (current_pid(), read_end)
    return _LIFELINE[1]


def _agent_identity() -> tuple[int, int]:
    """(pid, start time) of this process, as its containers' records name it; a forked
    child's are its own, so that the sweep does not take its containers for a dead agent's."""
    global _AGENT
    pid = current_pid()
    if _AGENT is None or _AGENT[0] != pid:
        _AGENT = (pid, process_start_time(pid) or 0)
    return _AGENT


#: (identity of /etc/resolv.conf, its text) as last read
_RESOLV: tuple[tuple[int, ...], str] | None = None


def _host_resolv_conf() -> str:
    """The host's /etc/resolv.conf, read again only when its file changed (one stat per
    container instead of an open and reads: resolvers change rarely, jobs start often)."""
    global _RESOLV
    try:
        st = os.stat("/etc/resolv.conf")
    except OSError:
        return ""
    identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    cached = _RESOLV
    if cached is not None and cached[0] == identity:
        return cached[1]
    try:
        text = Path("/etc/resolv.conf").read_text()
    except OSError:
        return ""
    _RESOLV = (identity, text)
    return text


def _hosts_file(hostname: str | None, extra: dict[str, str]) -> str:
    lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
    if hostname:
        lines.append(f"127.0.1.1\t{hostname}")
    lines.extend(f"{address}\t{name}" for name, address in extra.items())
    return "\n".join(lines) + "\n"


#: (owning pid, /dev/null open for reading and writing)
_DEVNULL: tuple[int, int] | None = None


def _devnull() -> int:
    """/dev/null, opened once per process: the child dups it onto its stdio (most jobs'
    stdin), so one descriptor serves every container instead of an open and a close each."""
    global _DEVNULL
    with _INIT_LOCK:
        if _DEVNULL is None or _DEVNULL[0] != current_pid():
            _DEVNULL = (current_pid(), os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC))
        return _DEVNULL[1]


class _Stream:
    """One stdio target resolved to a descriptor for the child (and a file for the handle)."""

    def __init__(self, target: StreamTarget, *, reading: bool) -> None:
        self.child_fd = -1
        self.parent_file: IO[bytes] | None = None
        self._close_after_start: list[int] = []
        if target is None:
            return
        if target == PIPE:
            r, w = os.pipe()
            child, parent = (r, w) if reading else (w, r)
            self.child_fd = child
            self._close_after_start.append(child)
            # Unbuffered (a FileIO): a buffered file costs two more system calls per pipe
            # (isatty's ioctl, a tell's lseek) and a buffer object, and the agent reads the
            # descriptor itself; read() and readline() still work on it.
            self.parent_file = open(parent, "wb" if reading else "rb", buffering=0)  # noqa: SIM115
        elif target == DEVNULL:
            self.child_fd = _devnull()
        elif isinstance(target, int):
            self.child_fd = target
        else:
            flags = os.O_RDONLY if reading else os.O_WRONLY | os.O_CREAT | os.O_TRUNC
            self.child_fd = os.open(target, flags | os.O_CLOEXEC, 0o644)
            self._close_after_start.append(self.child_fd)

    def started(self) -> None:
        """The child holds its copy now: drop ours."""
        for fd in self._close_after_start:
            os.close(fd)
        self._close_after_start.clear()

    def abandon(self) -> None:
        """Start failed: close everything."""
        self.started()
        if self.parent_file is not None:
            self.parent_file.close()


class Container:
    """A container about to be started from a :class:`ContainerSpec`."""

    def __init__(self, spec: ContainerSpec) -> None:
        self.spec = spec

    def start(self, late_env: Callable[[], Mapping[str, str]] | None = None) -> ContainerHandle:
        """Start the command in its container; returns once it has been exec'd.

        ``late_env()``, when given, is called once everything else is set up, right before
        the container's process is created, and its variables are added to the spec's: it may
        block until they are known (a token still on its way while the image, cgroups and
        metering are made ready). Raises ``InvalidArgument`` / ``NotFound`` for a bad spec
        (naming the field), and :class:`ContainerStartError` (a ``RuntimeFailure``) naming
        the failed step; everything set up before the failure, or before ``late_env``
        raised, is released again.
        """
        spec = self.spec
        spec.validate()
        state = _STATE_DIRS.get(spec.state_dir)
        if state is None:
            state = _STATE_DIRS.setdefault(spec.state_dir, StateDir(spec.state_dir))
        state.ensure()
        # 64 random bits in 16 hex digits, as uuid4's first 16 were (less its version digit),
        # without building a UUID object, and from the random module's generator (seeded
        # from the system's randomness at start and again in a forked child): unique names,
        # not secrets, so no getrandom call per container
        container_id = f"{random.getrandbits(64):016x}"
        notes: list[str] = []
        memlock = -1
        if spec.memory is not None:
            memlock = self._plan_memlock(spec.memory, notes)
        resolv = spec.resolv_conf if spec.resolv_conf is not None else _host_resolv_conf()
        if spec.isolated is not None:
            resolv, note = resolv_conf_for_isolated(resolv)
            notes.extend([note] if note else [])
        # Resources taken so far, released in reverse order when a later step fails.
        image_key: str | None = None
        job: cgroups.JobCgroups | None = None
        network: NodeNetwork | None = None
        attachment: Attachment | None = None
        meter_fd = -1
        #: metering's counters as this job started in a kept group (None: fresh counters)
        meter_start: Metering | None = None
        shape: kept.Shape | None = None
        joining = cgroups.CgroupJoin()
        streams: list[_Stream] = []
        try:
            image_key, lower = state.hold_image(spec.image)
            if spec.needs_cgroups():
                shape = kept.shape_of(spec, state.cgroup_group)
                reused = kept.KEPT.take(shape) if shape is not None else None
                if reused is not None:
                    try:
                        meter_start = kept.reset(reused, spec)
                        job, meter_fd = reused.job, reused.meter_fd
                    except RuntimeFailure:
                        pass  # removed by the reset: this job makes fresh groups
                if job is None:
                    name = container_id
                    if shape is not None:
                        name = kept.kept_name(*_agent_identity(), container_id)
                    job = cgroups.JobCgroups(cgroups.detect_layout(), state.cgroup_group, name)
                    job.create(
                        memory=spec.memory,
                        cpus=spec.cpus,
                        cpuset=spec.cpuset,
                        pids=spec.pids_limit,
                        need_v2=spec.metering or spec.metadata_guard,
                    )
                    if spec.metadata_guard:  # never started without it: raises instead
                        attach_metadata_guard(job)
                    if spec.metering:
                        meter_fd = self._attach_meter(job, notes)
                # metering's descriptor is the v2 group's directory opened for reading, as
                # clone3 takes the group: the child joins by it, no second open and close
                joining = job.open_join(v2_fd=meter_fd)
            if spec.isolated is not None:
                network = NodeNetwork(
                    state, spec.isolated.subnet, metadata_guard=spec.metadata_guard
                )
                attachment = network.attach(container_id, spec.isolated)
            elif spec.node_ports:
                network = NodeNetwork(state)
                network.open_ports(container_id, spec.node_ports)
            streams = [
                _Stream(spec.stdin, reading=True),
                _Stream(spec.stdout, reading=False),
                _Stream(spec.stderr, reading=False),
            ]
            env = spec.env if late_env is None else {**spec.env, **late_env()}
            if "HOME" not in env:
                # as runc sets it: the passwd entry in the image of the uid the command runs as
                env = {**env, "HOME": home_in_image(lower, spec.uid)}
            started = self._clone(
                spec, env, state, lower, memlock, joining, streams, attachment, resolv
            )
        except BaseException:
            for stream in streams:
                stream.abandon()
            if attachment is not None:
                attachment.started()  # no container holds it: the namespace goes
            if network is not None:
                with contextlib.suppress(RuntimeFailure):
                    network.detach(container_id)
            joining.close()
            if meter_fd >= 0:
                os.close(meter_fd)
            if job is not None:
                with contextlib.suppress(RuntimeFailure):
                    job.remove()
            if image_key is not None:
                with contextlib.suppress(RuntimeFailure):
                    state.unhold_image(image_key)
            raise
        joining.close()
        for stream in streams:
            stream.started()
        if attachment is not None:
            attachment.started()
        agent_pid, agent_start = _agent_identity()
        state.write_record(
            ContainerRecord(
                id=container_id,
                pid=started.pid,
                pid_start=started.start_time or process_start_time(started.pid) or 0,
                agent_pid=agent_pid,
                agent_start=agent_start,
                image_key=image_key,
                cgroups=list(job.dir_names) if job else [],
            )
        )
        for note in notes:
            warnings.warn(note, RuntimeWarningMessage, stacklevel=2)
        return ContainerHandle(
            container_id=container_id,
            pid=started.pid,
            pidfd=started.pidfd,
            status_fd=started.status_fd,
            state=state,
            image_key=image_key,
            cgroups=job,
            network=network,
            address=attachment.address if attachment is not None else None,
            meter_fd=meter_fd,
            meter_start=meter_start,
            # a metered job whose attach failed leaves no metered group to keep
            keep=shape if meter_fd >= 0 or not spec.metering else None,
            stdin=streams[0].parent_file,
            stdout=streams[1].parent_file,
            stderr=streams[2].parent_file,
            warnings=tuple(notes),
        )

    @staticmethod
    def _plan_memlock(memory: int, notes: list[str]) -> int:
        err = new_error()
        granted = ffi.new("int64_t *")
        hard = ffi.new("int64_t *")
        clamped = ffi.new("int *")
        check(lib.fbrt_memlock_plan(memory, granted, hard, clamped, err), err)
        if clamped[0]:
            notes.append(
                f"RLIMIT_MEMLOCK: the job's memory allocation is {memory} bytes but the hard "
                f"limit is {hard[0]} bytes and cannot be raised without CAP_SYS_RESOURCE; "
                f"the job runs with RLIMIT_MEMLOCK = {granted[0]} bytes"
            )
        return int(granted[0])

    @staticmethod
    def _attach_meter(job: cgroups.JobCgroups, notes: list[str]) -> int:
        if job.v2_dir_name is None:
            notes.append("metering is off: no cgroup v2 hierarchy to attach the programs to")
            return -1
        err = new_error()
        try:
            return check(
                lib.fbrt_meter_attach(os.fsencode(job.v2_dir_name), err),
                err,
                MeteringError,
                "metering",
            )
        except MeteringError as exc:
            notes.append(f"metering is off: {exc} (errno {exc.errno})")
            return -1

    @staticmethod
    def _clone(
        spec: ContainerSpec,
        env: Mapping[str, str],
        state: StateDir,
        lower: str,
        memlock: int,
        joining: cgroups.CgroupJoin,
        streams: list[_Stream],
        attachment: Attachment | None,
        resolv: str,
    ) -> Any:
        keep: list[Any] = []  # cffi buffers must outlive the call

        def text(value: str | os.PathLike[str] | None) -> Any:
            if value is None:
                return ffi.NULL
            buf = ffi.new("char[]", os.fsencode(value))
            keep.append(buf)
            return buf

        def text_array(values: list[str]) -> Any:
            array = ffi.new("char *[]", [text(v) for v in values] + [ffi.NULL])
            keep.append(array)
            return array

        c = ffi.new("struct fbrt_spec *")
        c.lower = text(lower)
        c.mnt_template_fd = _mnt_template_fd(state)
        c.scratch = ffi.NULL
        if spec.scratch_dir is not None:
            scratch = Path(spec.scratch_dir)
            scratch.mkdir(parents=True, exist_ok=True)
            c.scratch = text(scratch)
        c.argv = text_array(list(spec.command))
        c.envp = text_array([f"{k}={v}" for k, v in env.items()])
        c.path = text(env.get("PATH"))
        c.cwd = text(spec.cwd)
        c.hostname = text(spec.hostname)
        c.hosts = text(_hosts_file(spec.hostname, spec.extra_hosts))
        c.resolv = text(resolv)
        c.uid = spec.uid
        c.gid = spec.gid
        c.capabilities = capabilities.mask(spec.capabilities)
        groups = ffi.new("unsigned int[]", list(spec.groups) or [0])
        c.groups = groups
        c.ngroups = len(spec.groups)
        binds = ffi.new("struct fbrt_bind[]", max(1, len(spec.binds)))
        for i, bind in enumerate(spec.binds):
            binds[i].src = text(bind.src)
            binds[i].dst = text(bind.dst)
            binds[i].readonly = int(bind.readonly)
        c.binds = binds
        c.nbinds = len(spec.binds)
        c.devices = text_array(list(spec.devices))
        c.ndevices = len(spec.devices)
        c.new_net = int(spec.network or attachment is not None)
        c.net_fd = attachment.fd if attachment is not None else -1
        c.memlock = memlock
        tasks = ffi.new("int[]", joining.tasks or [0])
        c.cgroup_fds = tasks
        c.ncgroup_fds = len(joining.tasks)
        c.cgroup_v2_fd = joining.v2
        c.stdin_fd, c.stdout_fd, c.stderr_fd = (s.child_fd for s in streams)
        c.lifeline_fd = _lifeline()
        c.init_fd = _init_fd()
        started = ffi.new("struct fbrt_started *")
        err = new_error()
        check(lib.fbrt_container_start(c, started, err), err, ContainerStartError)
        return started


class ContainerHandle:
    """A started container: wait for it, signal it, read its metering, release it."""

    def __init__(
        self,
        *,
        container_id: str,
        pid: int,
        pidfd: int,
        status_fd: int,
        state: StateDir,
        image_key: str,
        cgroups: cgroups.JobCgroups | None,
        network: NodeNetwork | None,
        address: str | None,
        meter_fd: int,
        stdin: IO[bytes] | None,
        stdout: IO[bytes] | None,
        stderr: IO[bytes] | None,
        warnings: tuple[str, ...],
        meter_start: Metering | None = None,
        keep: kept.Shape | None = None,
    ) -> None:
        self.id = container_id
        #: host pid of the container's PID 1
        self.pid = pid
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self.warnings = warnings
        #: the job's address on the node's subnet (isolated jobs; None on another network)
        self.address = address
        self._pidfd = pidfd
        self._status_fd = status_fd
        self._state = state
        self._image_key: str | None = image_key
        self._cgroups = cgroups
        self._network = network
        self._meter_fd = meter_fd
        #: metering's descriptor is the handle's to close (not once its group is kept)
        self._meter_owned = True
        #: the counters as the job started (a kept group's, counting on from its last job)
        self._meter_start = meter_start
        #: the shape the job's groups are kept as when it ends (None: removed)
        self._keep = keep
        #: the counters as the job's cgroup was removed (they end with it)
        self._final_metering: Metering | None = None
        self._status: ExitStatus | None = None
        self._released = False

    @property
    def pidfd(self) -> int:
        """A pidfd of PID 1 (readable once it has ended), owned by the handle: closed when
        the container is released; -1 after that."""
        return self._pidfd

    @property
    def metering_enabled(self) -> bool:
        """Whether the metering programs are attached (False also after :meth:`close`)."""
        return self._meter_fd >= 0

    def poll(self) -> ExitStatus | None:
        """The exit status if the container has ended, else None (never blocks)."""
        try:
            return self.wait(timeout=0)
        except TimeoutError:
            return None

    def wait(self, timeout: float | None = None) -> ExitStatus:
        """Wait for the command to end; raises ``TimeoutError`` after ``timeout`` seconds.

        When it has ended, the job's mounts, cgroups and record are released (the metering
        counters stay readable until :meth:`close`).
        """
        if self._status is None:
            self._reap(timeout)
        self._release()
        assert self._status is not None
        return self._status

    def ended_status(self) -> ExitStatus:
        """The exit status of a container whose PID 1 has ended (its pidfd was readable),
        reaped without blocking (``TimeoutError`` if it still runs) and with nothing released
        yet: :meth:`wait` or :meth:`close` release it, so that the exit can be told before
        the clean-up, which may wait for a cgroup to empty."""
        if self._status is None:
            self._reap(0)
        assert self._status is not None
        return self._status

    def _reap(self, timeout: float | None) -> None:
        if timeout == 0:
            # not waiting (an ended container's pidfd was readable): no poll set to build
            pid, init_status = os.waitpid(self.pid, os.WNOHANG)
            if pid == 0:
                raise TimeoutError(f"container {self.id} still running after 0 s")
        else:
            if self._pidfd >= 0:
                poller = select.poll()
                poller.register(self._pidfd, select.POLLIN)
                if not poller.poll(None if timeout is None else int(timeout * 1000)):
                    raise TimeoutError(f"container {self.id} still running after {timeout} s")
            _, init_status = os.waitpid(self.pid, 0)
        raw = os.read(self._status_fd, 4)
        # PID 1 reports the command's exact status; without a report (PID 1 itself was
        # SIGKILLed) PID 1's own status is the answer.
        status = int.from_bytes(raw, "little", signed=True) if len(raw) == 4 else init_status
        oom = self._cgroups.oom_killed() if self._cgroups else False
        self._status = ExitStatus.from_wait_status(status, oom_killed=oom, warnings=self.warnings)

    def kill(self, sig: int = signal.SIGTERM) -> None:
        """Send ``sig`` to the container (PID 1 forwards it to the command)."""
        if self._status is None and self._pidfd >= 0:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, sig)

    def metering(self) -> Metering | None:
        """Bytes and packets per direction so far (None when metering is off)."""
        if self._final_metering is not None:
            return self._final_metering
        if self._meter_fd < 0:
            return None
        counters = ffi.new("struct fbrt_counters *")
        err = new_error()
        check(lib.fbrt_meter_read(self._meter_fd, counters, err), err, MeteringError)
        metering = Metering(
            counters.ingress_bytes,
            counters.ingress_packets,
            counters.egress_bytes,
            counters.egress_packets,
        )
        if self._meter_start is not None:
            # a kept group's counters run on from its earlier jobs: this job's are the rest
            metering = metering.since(self._meter_start)
        if self._status is not None:
            # reaped: PID 1 and with it every process of the container is gone, so these are
            # the final counts (and the release need not read them again)
            self._final_metering = metering
        return metering

    def _release(self) -> None:
        if self._released:
            return
        self._released = True
        for fd_name in ("_pidfd", "_status_fd"):
            fd = getattr(self, fd_name)
            if fd >= 0:
                os.close(fd)
                setattr(self, fd_name, -1)
        failures: list[Exception] = []
        if self._cgroups is not None:
            if self._meter_fd >= 0 and self._final_metering is None:
                # the counters live in the cgroup's program attachments: kept past its removal
                try:
                    self._final_metering = self.metering()
                except RuntimeFailure as exc:
                    failures.append(exc)
            group = kept.KeptGroup(self._cgroups, self._meter_fd)
            leftover: kept.KeptGroup | None = group
            if not failures and self._keep is not None:
                leftover = kept.KEPT.keep(self._keep, group, self._final_metering)
            if leftover is group:
                try:
                    self._cgroups.remove()
                except RuntimeFailure as exc:
                    failures.append(exc)
            else:
                # the pool holds the groups and metering's descriptor now
                self._meter_owned = False
                if leftover is not None:
                    # the group the full pool let go for this one: removed as this one was
                    # to be
                    try:
                        leftover.remove()
                    except RuntimeFailure as exc:
                        failures.append(exc)
            self._cgroups = None
        if self._network is not None:
            try:
                self._network.detach(self.id)
            except RuntimeFailure as exc:
                failures.append(exc)
            self._network = None
        if self._image_key is not None:
            try:
                self._state.unhold_image(self._image_key)
            except RuntimeFailure as exc:
                failures.append(exc)
            self._image_key = None
        if not failures:
            self._state.remove_record(self.id)
        else:
            raise failures[0]

    def close(self) -> None:
        """Kill the container if it still runs, then free everything it holds."""
        if self._status is None:
            self.kill(signal.SIGKILL)
        self.wait()
        if self._meter_fd >= 0:
            if self._meter_owned:
                os.close(self._meter_fd)
            self._meter_fd = -1
        for stream in (self.stdin, self.stdout, self.stderr):
            if stream is not None:
                stream.close()

    def __enter__(self) -> ContainerHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
