"""One assignment, run through the node runtime: the task-driver side of Substrate.

Shaped after Nomad's task-driver contract: :meth:`JobExecution.start` (image, volumes,
devices, container), :meth:`JobExecution.wait` (exit status, with stdout/stderr streamed
meanwhile), :meth:`JobExecution.signal`, :meth:`JobExecution.stop` (cancel or time-out:
SIGTERM, then SIGKILL after a grace period), :meth:`JobExecution.destroy` (free everything)
and :meth:`JobExecution.stats`.

Everything runs on the agent's event loop except the blocking runtime calls (image pulls,
container start, reaping), which go to thread pools. Output is read from non-blocking pipes
and handed to the log sink in batches; the container's exit is noticed through a pidfd, so a
waiting job costs no thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import shutil
import signal
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.errors import FuzzballError
from fuzzball_core.hookspecs import ContainerPreparation, Device
from fuzzball_core.spec.models import Job, Service
from fuzzball_core.spec.resources import job_resources
from fuzzball_core.substrate import image_builds
from fuzzball_core.substrate.devices import DevicePool
from fuzzball_core.substrate.image_write_back import DEFAULT_STALL_SECONDS, WriteBack, write_back
from fuzzball_core.substrate.images import NodeImages, describe_pull_failure
from fuzzball_core.substrate.ingress import fetch_ingress
from fuzzball_core.substrate.mount_holds import ImageMountHolds
from fuzzball_core.substrate.pmi import Fence, PmiService
from fuzzball_core.substrate.ranks import LAUNCHER_SCRIPT, RankLayout
from fuzzball_core.substrate.volumes import WorkflowVolumes
from fuzzball_plugins.images.object_cache_backend import upload
from fuzzball_plugins.images.settings import ImageSettings, RetryPolicy
from fuzzball_runtime import DEVNULL, PIPE, Bind, Container, ContainerHandle, ContainerSpec
from fuzzball_runtime.spec import DEFAULT_PATH

log = logging.getLogger("fuzzball.substrate")

#: Seconds between SIGTERM and SIGKILL when a job is canceled or runs out of time.
KILL_GRACE = 5.0
#: Bytes of one LogData message at most, and the batching delay for smaller ones.
LOG_CHUNK = 64 * 1024
LOG_FLUSH_DELAY = 0.1
#: Where a job's script appears inside its container (read-only).
SCRIPT_DIR = "/.fuzzball"
#: where the launcher of a node's several ranks is bound in a multinode job's container
RANKS_DIR = "/.fuzzball-ranks"
#: Seconds to drain output after the container's PID 1 ended (its pipes close with it).
DRAIN_TIMEOUT = 2.0
#: Seconds between two progress reports of one image step.
PROGRESS_INTERVAL = 0.5
#: Payload kinds of image stages' runs, and the stream their progress goes out on.
PULL = "image-pull"
BUILD = "image-build"
PROGRESS_STREAM = "progress"

LogSink = Callable[[int, str, bytes], None]

_HOSTNAME_UNSAFE = re.compile(r"[^a-z0-9-]+")


@dataclass(frozen=True)
class RunRequest:
    """What Orchestrate asked this node to run (an ``Assignment``, parsed)."""

    run_id: int
    workflow_id: str
    stage_name: str
    task_id: int | None
    #: None for an image stage's run, whose definition is an image payload
    job: Job | Service | None
    definition: dict[str, Any]
    timeout_seconds: float | None
    #: the nodes of the run, in rank order (several for a multinode job)
    node_ids: list[str] = field(default_factory=list)
    #: what to fetch into the mounted volumes first: {volume: [{source, destination}]}
    volume_ingress: dict[str, list[dict[str, str]]] = field(default_factory=dict)

    @classmethod
    def from_assignment(cls, assignment: node_pb2.Assignment) -> RunRequest:
        """Parse an assignment; raises InvalidArgument when its job definition is unusable."""
        definition = json.loads(assignment.job_json)
        image_work = definition.get("kind") in (PULL, BUILD)
        return cls(
            run_id=assignment.run_id,
            workflow_id=assignment.workflow_id,
            stage_name=assignment.stage_name,
            task_id=assignment.task_id if assignment.has_task else None,
            job=None
            if image_work
            else _step_model(assignment.stage_name).model_validate(definition),
            definition=definition,
            timeout_seconds=assignment.timeout_seconds or None,
            node_ids=list(assignment.node_ids),
            volume_ingress=json.loads(assignment.volume_ingress_json or "{}"),
        )

    @property
    def job_name(self) -> str:
        """``hello`` for the stage ``jobs.hello``."""
        return self.stage_name.partition(".")[2] or self.stage_name


@dataclass
class RunOutcome:
    """How a run ended, as reported in ``RunExited``."""

    exit_code: int = -1
    signal: int = 0
    oom_killed: bool = False
    timed_out: bool = False
    canceled: bool = False
    message: str = ""
    time: float = field(default_factory=time.time)
    metering: dict[str, Any] | None = None

    def to_message(self, run_id: int) -> node_pb2.RunExited:
        """The ``RunExited`` report of this outcome."""
        return node_pb2.RunExited(
            run_id=run_id,
            exit_code=self.exit_code,
            signal=self.signal,
            oom_killed=self.oom_killed,
            timed_out=self.timed_out,
            canceled=self.canceled,
            message=self.message,
            time=self.time,
            metering_json=json.dumps(self.metering) if self.metering else "",
        )


@dataclass
class NodeServices:
    """What every execution on this node shares."""

    images: NodeImages
    volumes: WorkflowVolumes
    devices: DevicePool
    hooks: Any
    state_dir: Path
    runs_dir: Path
    start_pool: Executor
    pull_pool: Executor
    metering: bool = True
    #: keeps recently used image mounts between jobs (None: every job mounts its own)
    mount_holds: ImageMountHolds | None = None


def container_hostname(request: RunRequest, ranks: RankLayout | None = None) -> str:
    """The job's name as a DNS label (``-<task id>`` appended for array tasks, ``-<node
    index>`` for the parts of a multinode job, which MPI tells apart by hostname)."""
    base = _HOSTNAME_UNSAFE.sub("-", request.job_name.lower()).strip("-") or "job"
    suffix = f"-{request.task_id}" if request.task_id is not None else ""
    if ranks is not None:
        suffix += f"-{ranks.part}"
    return base[: 63 - len(suffix)].rstrip("-") + suffix


def job_command(job: Job, script_path: str | None) -> list[str]:
    """The argv: the script run by /bin/sh, or the command, followed by ``args``."""
    args = list(job.args or [])
    if script_path is not None:
        return ["/bin/sh", script_path, *args]
    return [*(job.command or []), *args]


def job_environment(request: RunRequest, hostname: str) -> dict[str, str]:
    """The container's environment: defaults, the job's ``env``, then the ``FB_*`` variables."""
    env = {"PATH": DEFAULT_PATH, "HOSTNAME": hostname}
    for entry in request.job.env or ():
        name, _, value = str(entry).partition("=")
        env[name] = value
    env["FB_WORKFLOW_ID"] = request.workflow_id
    env["FB_JOB_NAME"] = request.job_name
    if request.task_id is not None:
        env["FB_TASK_ID"] = str(request.task_id)
    return env


class JobExecution:
    """One run's container from image pull to release."""

    def __init__(
        self,
        request: RunRequest,
        node: NodeServices,
        sink: LogSink,
        *,
        node_id: str = "",
        fence: Fence | None = None,
    ) -> None:
        self.request = request
        self.node = node
        self._sink = sink
        #: this node's share of a multinode job's ranks, and the PMI service they use
        self.ranks = RankLayout.of(request.job, request.node_ids, node_id) if request.job else None
        self._fence = fence
        self._pmi: PmiService | None = None
        self._loop = asyncio.get_running_loop()
        self._handle: ContainerHandle | None = None
        self._devices: list[Device] = []
        self._run_dir: Path | None = None
        self._stopping: str | None = None  # "canceled" | "timed_out"
        self._stop_message = ""
        self._exited = asyncio.Event()
        self._eof: dict[int, asyncio.Event] = {}
        self._buffers: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
        self._flush_scheduled = False
        self._timers: list[asyncio.TimerHandle] = []
        self._pidfd = -1
        self._acquired_volumes = False
        self.started_at: float | None = None
        self._image_work: asyncio.Future[RunOutcome] | None = None
        self._build_base: Path | None = None
        self._progress_sent: dict[str, float] = {}

    # -- start ---------------------------------------------------------------------------------

    async def start(self) -> RunOutcome | None:
        """Pull the image and start the container; an outcome instead when that failed."""
        request = self.request
        if request.job is None:
            return await self._start_image_work()
        uri = request.job.image.uri
        try:
            image = await self._loop.run_in_executor(
                self.node.pull_pool,
                lambda: self.node.images.ensure(uri, ttl=request.job.image.cache_ttl),
            )
        except Exception as exc:
            return RunOutcome(message=describe_pull_failure(uri, exc))
        if self._stopping is not None:
            return self._outcome_without_start()
        if request.volume_ingress:
            failed = await self._fill_volumes()
            if failed is not None:
                return failed
        try:
            rank_env = await self._start_pmi()
            spec = self._container_spec(image, rank_env)
        except Exception as exc:
            return RunOutcome(message=f"the job's container could not be prepared: {_text(exc)}")
        try:
            self._handle = await self._loop.run_in_executor(
                self.node.start_pool, self._start_container, spec
            )
        except Exception as exc:
            return RunOutcome(message=f"the container could not start: {_text(exc)}")
        self.started_at = time.time()
        for note in self._handle.warnings:
            log.warning("run %d: %s", request.run_id, note)
        self._watch()
        if self._stopping is not None:  # canceled while the container was being started
            self._begin_stop()
        elif request.timeout_seconds:
            self._timers.append(
                self._loop.call_later(request.timeout_seconds, self.stop, "timed_out", "")
            )
        return None

    # -- image stages --------------------------------------------------------------------------

    async def _start_image_work(self) -> RunOutcome | None:
        """A pull runs in the background until :meth:`wait`; a build pulls its base, then
        starts its post script's container."""
        work = self.request.definition
        if work["kind"] == PULL:
            self._image_work = self._loop.run_in_executor(self.node.pull_pool, self._pull)
            return None
        base_uri = str(work["from"]["uri"])
        try:
            base = await self._loop.run_in_executor(
                self.node.pull_pool,
                lambda: self.node.images.ensure(
                    base_uri, digest=str(work["from"].get("digest") or ""), progress=self._progress
                ),
            )
        except Exception as exc:
            return RunOutcome(message=describe_pull_failure(base_uri, exc))
        self._build_base = base
        self._run_dir = self.node.runs_dir / str(self.request.run_id)
        scratch = self._run_dir / "scratch"
        try:
            image_builds.write_files(scratch / "upper", work.get("files") or {})
            spec = ContainerSpec(
                image=base,
                command=["/bin/sh", "-c", str(work.get("post") or "true")],
                env={"PATH": DEFAULT_PATH, "HOME": "/root"},
                hostname=container_hostname(self.request),
                # the host's network: package installs need it; everything else is confined
                network=False,
                stdin=DEVNULL,
                stdout=PIPE,
                stderr=PIPE,
                state_dir=self.node.state_dir,
                scratch_dir=scratch,
            )
            self._handle = await self._loop.run_in_executor(
                self.node.start_pool, Container(spec).start
            )
        except Exception as exc:
            return RunOutcome(message=f"the build's container could not start: {_text(exc)}")
        self.started_at = time.time()
        self._watch()
        if self._stopping is not None:
            self._begin_stop()
        return None

    def _pull(self) -> RunOutcome:
        work = self.request.definition
        uri = str(work["uri"])
        try:
            image = self.node.images.ensure(
                uri, digest=str(work.get("digest") or ""), progress=self._progress
            )
        except Exception as exc:
            return RunOutcome(message=describe_pull_failure(uri, exc))
        target = work.get("write-back")
        if isinstance(target, dict) and self._stopping is None:
            write_back(
                image,
                self._write_back_plan(target),
                self._report,
                stopped=lambda: self._stopping is not None,
            )
        return RunOutcome(exit_code=0)

    def _write_back_plan(self, target: dict[str, Any]) -> WriteBack:
        config = self.node.images.images_config
        try:
            delays = ImageSettings.from_config(config).retry.delays()
        except FuzzballError:
            delays = RetryPolicy().delays()
        return WriteBack(
            url=str(config.get("object-cache-url") or ""),
            token=str(config.get("object-cache-token") or ""),
            target=target,
            stall=float(config.get("cache-write-back-stall") or DEFAULT_STALL_SECONDS),
            delays=delays,
        )

    def _finish_build(self) -> RunOutcome:
        assert self._run_dir is not None and self._build_base is not None
        work = self.request.definition
        config = self.node.images.images_config
        url = str(config.get("object-cache-url") or "")
        if not url:
            return RunOutcome(
                message="images.object-cache-url is not set on this node:"
                " the built image has nowhere to go"
            )
        out = self._run_dir / "image.erofs"
        try:
            self._progress("convert", 0, 1)
            image_builds.seal(self._build_base, self._run_dir / "scratch", out)
            self._progress("convert", 1, 1)
            upload(
                url,
                str(config.get("object-cache-token") or ""),
                work["target"],
                out,
                progress=self._progress,
            )
        except Exception as exc:
            return RunOutcome(message=f"the built image could not be stored: {_text(exc)}")
        self._progress("done", 1, 1)
        return RunOutcome(exit_code=0)

    def _progress(self, step: str, done: int, total: int) -> None:
        """Report an image step (from any thread), at most a few times a second per step."""
        now = time.monotonic()
        last = self._progress_sent.get(step)
        if done < total and last is not None and now - last < PROGRESS_INTERVAL:
            return
        self._progress_sent[step] = now
        self._send_progress({"step": step, "done": done, "total": total})

    def _report(self, document: dict[str, Any]) -> None:
        """Report a progress document as is: throttled while bytes move, always otherwise."""
        if "status" in document:
            self._send_progress(document)
        else:
            self._progress(str(document["step"]), int(document["done"]), int(document["total"]))

    def _send_progress(self, document: dict[str, Any]) -> None:
        data = json.dumps(document).encode()
        self._loop.call_soon_threadsafe(self._sink, self.request.run_id, PROGRESS_STREAM, data)

    def _start_container(self, spec: ContainerSpec) -> ContainerHandle:
        if self.node.mount_holds is not None:
            self.node.mount_holds.hold(Path(spec.image))
        return Container(spec).start()

    async def _fill_volumes(self) -> RunOutcome | None:
        """Fetch the mounted volumes' ingress (once per node); an outcome if that failed."""
        self._acquire_volumes()
        request = self.request
        try:
            await self._loop.run_in_executor(
                self.node.pull_pool,
                fetch_ingress,
                self.node.volumes,
                request.workflow_id,
                request.volume_ingress,
            )
        except Exception as exc:
            return RunOutcome(message=_text(exc))
        return self._outcome_without_start() if self._stopping is not None else None

    async def _start_pmi(self) -> dict[str, str]:
        """Serve PMI to this node's ranks of a multinode job; the ranks' variables."""
        if self.ranks is None:
            return {}
        self._pmi = PmiService(
            self.ranks,
            f"fuzzball-run-{self.request.run_id}",
            self._fence or _local_fence,
            lambda why: self.stop("failed", why),
        )
        return self.ranks.environment(await self._pmi.start())

    def _container_spec(self, image: Path, rank_env: dict[str, str]) -> ContainerSpec:
        request = self.request
        job = request.job
        assert job is not None
        hostname = container_hostname(request, self.ranks)
        env = job_environment(request, hostname)
        env.update(rank_env)
        binds: list[Bind] = []
        if job.mounts:
            self._acquire_volumes()
            for path, mount in job.mounts.items():
                source = self.node.volumes.volume_dir(request.workflow_id, mount.volume)
                binds.append(Bind(str(source), str(path)))
        script_path = None
        if job.script is not None:
            script_dir = self._run_subdir("script")
            (script_dir / "script").write_text(job.script)
            binds.append(Bind(str(script_dir), SCRIPT_DIR, readonly=True))
            script_path = f"{SCRIPT_DIR}/script"
        binds.extend(self._file_binds(job.files or {}))
        command = job_command(job, script_path)
        if not command:
            raise FuzzballError("the job has neither command nor script")
        if self.ranks is not None and self.ranks.procs_per_node > 1:
            launcher = self._run_subdir("ranks") / "launch"
            launcher.write_text(LAUNCHER_SCRIPT)
            binds.append(Bind(str(launcher.parent), RANKS_DIR, readonly=True))
            first, count = self.ranks.first_rank, self.ranks.procs_per_node
            command = ["/bin/sh", f"{RANKS_DIR}/launch", str(first), str(count), *command]
        resources = job_resources(job)
        wanted_devices = dict(resources.devices)
        if wanted_devices:
            self._devices = self.node.devices.allocate(request.run_id, wanted_devices)
        preparation = ContainerPreparation()
        self.node.hooks.fuzzball_job_prepare_container(
            job=request.definition, devices=list(self._devices), container=preparation
        )
        env.update(preparation.env)
        binds.extend(Bind(src, dst) for src, dst in preparation.binds)
        declared_cpu = job.resource is not None and job.resource.cpu is not None
        return ContainerSpec(
            image=image,
            command=command,
            env=env,
            cwd=str(job.cwd or "/"),
            hostname=hostname,
            binds=binds,
            devices=list(preparation.device_paths),
            memory=resources.memory or None,
            # Cores are a CPU quota only when the job asks for them: a job without a
            # resource section runs unthrottled, and without a per-job cgroup to create.
            cpus=float(resources.cores) if declared_cpu else None,
            stdin=DEVNULL,
            stdout=PIPE,
            stderr=PIPE,
            metering=self.node.metering,
            state_dir=self.node.state_dir,
        )

    def _acquire_volumes(self) -> None:
        """Keep the workflow's volumes on this node while this run needs them (once)."""
        if not self._acquired_volumes:
            self.node.volumes.acquire(self.request.workflow_id)
            self._acquired_volumes = True

    def _run_subdir(self, name: str) -> Path:
        """A fresh directory under this run's own (removed when the run is released)."""
        if self._run_dir is None:
            self._run_dir = self.node.runs_dir / str(self.request.run_id)
        path = self._run_dir / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def _file_binds(self, files: dict[str, str]) -> list[Bind]:
        """The job's ``files`` (container path -> content, resolved by Orchestrate), each a
        copy of its own bound over its path: bound rather than written into the root so that
        paths under the container's /tmp tmpfs and inside volumes work as well."""
        if not files:
            return []
        files_dir = self._run_subdir("files")
        binds = []
        for index, (path, content) in enumerate(sorted(files.items())):
            copy = files_dir / str(index)
            copy.write_text(content)
            binds.append(Bind(str(copy), path))
        return binds

    # -- output and exit -----------------------------------------------------------------------

    def _watch(self) -> None:
        handle = self._handle
        assert handle is not None
        for stream_name, stream in (("stdout", handle.stdout), ("stderr", handle.stderr)):
            if stream is None:
                continue
            fd = stream.fileno()
            os.set_blocking(fd, False)
            self._eof[fd] = asyncio.Event()
            self._loop.add_reader(fd, self._read, fd, stream_name)
        self._pidfd = os.pidfd_open(handle.pid)
        self._loop.add_reader(self._pidfd, self._on_exit)

    def _read(self, fd: int, stream_name: str) -> None:
        try:
            data = os.read(fd, LOG_CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._loop.remove_reader(fd)
            self._eof[fd].set()
            return
        buffer = self._buffers[stream_name]
        buffer += data
        if len(buffer) >= LOG_CHUNK:
            self._flush()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_later(LOG_FLUSH_DELAY, self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        for stream_name, buffer in self._buffers.items():
            while buffer:
                chunk = bytes(buffer[:LOG_CHUNK])
                del buffer[:LOG_CHUNK]
                self._sink(self.request.run_id, stream_name, chunk)

    def _on_exit(self) -> None:
        self._loop.remove_reader(self._pidfd)
        os.close(self._pidfd)
        self._pidfd = -1
        self._exited.set()

    async def wait(self) -> RunOutcome:
        """Wait for the container to end; logs are flushed before this returns."""
        if self._image_work is not None:
            outcome = await self._image_work
            if self._stopping is not None:
                return self._outcome_without_start()
            return outcome
        handle = self._handle
        assert handle is not None
        await self._exited.wait()
        if self._eof:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    asyncio.gather(*(e.wait() for e in self._eof.values())), DRAIN_TIMEOUT
                )
        for fd, eof in self._eof.items():
            if not eof.is_set():
                self._loop.remove_reader(fd)
                self._read_rest(fd, handle)
        self._flush()
        for timer in self._timers:
            timer.cancel()
        self._close_pmi()
        status, metering = await self._loop.run_in_executor(self.node.start_pool, self._reap)
        outcome = RunOutcome(
            exit_code=-1 if status.signal is not None else int(status.exit_code or 0),
            signal=status.signal or 0,
            oom_killed=status.oom_killed,
            timed_out=self._stopping == "timed_out",
            canceled=self._stopping == "canceled",
            message=self._stop_message,
            metering=metering,
        )
        if self._build_base is not None and outcome.exit_code == 0 and not self._stopping:
            outcome = await self._loop.run_in_executor(self.node.pull_pool, self._finish_build)
        return outcome

    def _read_rest(self, fd: int, handle: ContainerHandle) -> None:
        name = "stdout" if handle.stdout is not None and handle.stdout.fileno() == fd else "stderr"
        with contextlib.suppress(OSError):
            while data := os.read(fd, LOG_CHUNK):
                self._buffers[name] += data

    def _reap(self) -> tuple[Any, dict[str, Any] | None]:
        handle = self._handle
        assert handle is not None
        status = handle.wait()
        metering = None
        if handle.metering_enabled:
            try:
                counters = handle.metering()
                metering = counters.as_dict() if counters is not None else None
            except FuzzballError as exc:
                log.warning("run %d: metering unreadable: %s", self.request.run_id, exc)
        handle.close()
        return status, metering

    # -- control -------------------------------------------------------------------------------

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the container (nothing when it is not running)."""
        if self._handle is not None and not self._exited.is_set():
            self._handle.kill(sig)

    def stop(self, reason: str, message: str = "") -> None:
        """End the run as ``canceled``, ``timed_out`` or ``failed`` (a rank failed; the
        message says how): SIGTERM now, SIGKILL after a grace."""
        if self._stopping is not None:
            return
        self._stopping = reason
        self._stop_message = message
        if self._handle is not None:
            self._begin_stop()

    def _begin_stop(self) -> None:
        self.signal(signal.SIGTERM)
        self._timers.append(self._loop.call_later(KILL_GRACE, self.signal, signal.SIGKILL))

    def _outcome_without_start(self) -> RunOutcome:
        return RunOutcome(
            canceled=self._stopping == "canceled",
            timed_out=self._stopping == "timed_out",
            message=self._stop_message,
        )

    def _close_pmi(self) -> None:
        if self._pmi is not None:
            self._pmi.close()
            self._pmi = None

    def destroy(self) -> None:
        """Free what the run held on the node: devices, its directory, its volumes' claim."""
        self._close_pmi()
        if self._devices:
            self.node.devices.release(self.request.run_id)
            self._devices = []
        if self._run_dir is not None:
            shutil.rmtree(self._run_dir, ignore_errors=True)
            self._run_dir = None
        if self._acquired_volumes:
            self.node.volumes.release(self.request.workflow_id, time.time())
            self._acquired_volumes = False

    def stats(self) -> dict[str, Any]:
        """The run's container pid, start time and network counters so far."""
        handle = self._handle
        data: dict[str, Any] = {"run_id": self.request.run_id, "started_at": self.started_at}
        if handle is not None and not self._exited.is_set():
            data["pid"] = handle.pid
            with contextlib.suppress(FuzzballError):
                counters = handle.metering()
                if counters is not None:
                    data["metering"] = counters.as_dict()
        return data


def _step_model(stage_name: str) -> type[Job] | type[Service]:
    """The model of a stage's definition: services carry fields jobs do not."""
    return Service if stage_name.startswith("services.") else Job


async def _local_fence(seq: int, kvs: dict[str, str]) -> dict[str, str]:
    """The barrier of a run with no Orchestrate to span (one node, or a test)."""
    return {}


def _text(exc: BaseException) -> str:
    return exc.message if isinstance(exc, FuzzballError) else f"{type(exc).__name__}: {exc}"
