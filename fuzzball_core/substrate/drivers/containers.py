"""What every driver whose work is one container shares: watching it and ending it.

:class:`ContainerProcess` follows a started container from the event loop: its output is read
from non-blocking pipes and handed to the log sink in batches, its exit is noticed through a
pidfd (a waiting run costs no thread), and a stop is SIGTERM, then SIGKILL after a grace.
:class:`ContainerDriver` is the part of the task-driver contract built on it (starting the
container on the node's thread pool, wait, stop, signal, destroy, stats); the container job,
service, multinode part and image build drivers add how their container is prepared.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from abc import abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fuzzball_core.errors import FuzzballError
from fuzzball_core.substrate.drivers.base import (
    LogSink,
    NodeServices,
    RunOutcome,
    RunRequest,
    StopReason,
    TaskDriver,
)
from fuzzball_core.substrate.drivers.steps import RunClaims
from fuzzball_runtime import Container, ContainerHandle, ContainerSpec

log = logging.getLogger("fuzzball.substrate")

#: Seconds between SIGTERM and SIGKILL when a run is canceled or runs out of time.
KILL_GRACE = 5.0
#: Bytes of one LogData message at most, and the batching delay for smaller ones.
LOG_CHUNK = 64 * 1024
LOG_FLUSH_DELAY = 0.1
#: Seconds to drain output after the container's PID 1 ended (its pipes close with it).
DRAIN_TIMEOUT = 2.0


class ContainerProcess:
    """A started container, watched from the event loop until it is reaped."""

    def __init__(
        self,
        handle: ContainerHandle,
        run_id: int,
        sink: LogSink,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.handle = handle
        self._run_id = run_id
        self._sink = sink
        self._loop = loop
        self._exited = asyncio.Event()
        self._eof: dict[int, asyncio.Event] = {}
        self._buffers: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
        self._flush_scheduled = False
        self._timers: list[asyncio.TimerHandle] = []
        for stream_name, stream in (("stdout", handle.stdout), ("stderr", handle.stderr)):
            if stream is None:
                continue
            fd = stream.fileno()
            os.set_blocking(fd, False)
            self._eof[fd] = asyncio.Event()
            loop.add_reader(fd, self._read, fd, stream_name)
        self._pidfd = os.pidfd_open(handle.pid)
        loop.add_reader(self._pidfd, self._on_exit)

    @property
    def exited(self) -> bool:
        """True once the container's PID 1 ended."""
        return self._exited.is_set()

    def later(self, delay: float, callback: Callable[..., Any], *args: Any) -> None:
        """Call ``callback(*args)`` after ``delay`` seconds unless the container ended first."""
        self._timers.append(self._loop.call_later(delay, callback, *args))

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the container (nothing once it ended)."""
        if not self._exited.is_set():
            self.handle.kill(sig)

    def terminate(self) -> None:
        """SIGTERM now, SIGKILL after :data:`KILL_GRACE` seconds if it is still there."""
        self.signal(signal.SIGTERM)
        self.later(KILL_GRACE, self.signal, signal.SIGKILL)

    async def ended(self) -> None:
        """Wait for the container to end; its output is all handed to the sink on return."""
        await self._exited.wait()
        if self._eof:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    asyncio.gather(*(e.wait() for e in self._eof.values())), DRAIN_TIMEOUT
                )
        for fd, eof in self._eof.items():
            if not eof.is_set():
                # a process the container left behind still holds the pipe: take what is there
                self._loop.remove_reader(fd)
                self._read_rest(fd)
        self._flush()
        for timer in self._timers:
            timer.cancel()

    def reap(self) -> tuple[Any, dict[str, Any] | None]:
        """The container's exit status and metering, its resources freed (blocking)."""
        handle = self.handle
        status = handle.wait()
        metering = None
        if handle.metering_enabled:
            try:
                counters = handle.metering()
                metering = counters.as_dict() if counters is not None else None
            except FuzzballError as exc:
                log.warning("run %d: metering unreadable: %s", self._run_id, exc)
        handle.close()
        return status, metering

    def stats(self) -> dict[str, Any]:
        """The running container's pid and metering so far (nothing once it ended)."""
        if self._exited.is_set():
            return {}
        data: dict[str, Any] = {"pid": self.handle.pid}
        with contextlib.suppress(FuzzballError):
            counters = self.handle.metering()
            if counters is not None:
                data["metering"] = counters.as_dict()
        return data

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

    def _read_rest(self, fd: int) -> None:
        stdout = self.handle.stdout
        name = "stdout" if stdout is not None and stdout.fileno() == fd else "stderr"
        with contextlib.suppress(OSError):
            while data := os.read(fd, LOG_CHUNK):
                self._buffers[name] += data

    def _flush(self) -> None:
        self._flush_scheduled = False
        for stream_name, buffer in self._buffers.items():
            while buffer:
                chunk = bytes(buffer[:LOG_CHUNK])
                del buffer[:LOG_CHUNK]
                self._sink(self._run_id, stream_name, chunk)

    def _on_exit(self) -> None:
        self._loop.remove_reader(self._pidfd)
        os.close(self._pidfd)
        self._pidfd = -1
        self._exited.set()


class ContainerDriver(TaskDriver):
    """A run whose work is one container; subclasses say how it is prepared (:meth:`start`)."""

    def __init__(self, request: RunRequest, node: NodeServices, sink: LogSink) -> None:
        super().__init__(request, node, sink)
        self.claims = RunClaims(node, request)
        self.process: ContainerProcess | None = None

    @abstractmethod
    async def start(self) -> RunOutcome | None:
        """Prepare the container and :meth:`launch` it; the outcome instead on failure."""

    async def launch(self, spec: ContainerSpec, *, hold_image: bool, timeout: float | None) -> None:
        """Start the container (raises when it cannot), then watch it.

        ``hold_image`` keeps the image mounted between runs (jobs reuse images; a build's
        base is used once); ``timeout`` stops the run as timed out after that many seconds.
        """
        handle = await self.loop.run_in_executor(
            self.node.start_pool, self._start_container, spec, hold_image
        )
        self.started_at = time.time()
        for note in handle.warnings:
            log.warning("run %d: %s", self.request.run_id, note)
        self.process = ContainerProcess(handle, self.request.run_id, self.sink, self.loop)
        if self.stopping is not None:  # stopped while the container was being started
            self.process.terminate()
        elif timeout:
            self.process.later(timeout, self.stop, StopReason.TIMED_OUT, "")

    def _start_container(self, spec: ContainerSpec, hold_image: bool) -> ContainerHandle:
        if hold_image and self.node.mount_holds is not None:
            self.node.mount_holds.hold(Path(spec.image))
        return Container(spec).start()

    async def wait(self) -> RunOutcome:
        """Wait for the container to end; logs are flushed before this returns."""
        process = self.process
        assert process is not None, "wait() after a start() that returned no outcome"
        await process.ended()
        self._container_ended()
        status, metering = await self.loop.run_in_executor(self.node.start_pool, process.reap)
        outcome = RunOutcome(
            exit_code=-1 if status.signal is not None else int(status.exit_code or 0),
            signal=status.signal or 0,
            oom_killed=status.oom_killed,
            timed_out=self.stopping == StopReason.TIMED_OUT,
            canceled=self.stopping == StopReason.CANCELED,
            message=self.stop_message,
            metering=metering,
        )
        return await self._after_container(outcome)

    def _container_ended(self) -> None:
        """What to end as soon as the container did, before it is reaped (nothing here)."""

    async def _after_container(self, outcome: RunOutcome) -> RunOutcome:
        """The run's outcome given its container's (the container's, unless the work goes
        on after it)."""
        return outcome

    def _on_stop(self) -> None:
        if self.process is not None:
            self.process.terminate()

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the container (nothing when it is not running)."""
        if self.process is not None:
            self.process.signal(sig)

    def destroy(self) -> None:
        """Free the run's directory, devices and volume claim."""
        self.claims.release()

    def stats(self) -> dict[str, Any]:
        """The run's id and start time, and the running container's pid and metering."""
        data = super().stats()
        if self.process is not None:
            data.update(self.process.stats())
        return data
