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
import collections
import contextlib
import functools
import logging
import os
import select
import signal
import threading
import time
import weakref
from abc import abstractmethod
from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from pathlib import Path
from typing import Any, TypeVar

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

T = TypeVar("T")

#: Seconds between SIGTERM and SIGKILL when a run is canceled or runs out of time.
KILL_GRACE = 5.0
#: Bytes of one LogData message at most, and the batching delay for smaller ones.
LOG_CHUNK = 64 * 1024
LOG_FLUSH_DELAY = 0.1
#: Seconds to drain output after the container's PID 1 ended (its pipes close with it).
DRAIN_TIMEOUT = 2.0


class FdWatcher:
    """The readable file descriptors of the containers one event loop watches, through one
    epoll set of their own that the loop watches as a single reader.

    Each container has three descriptors (its stdout and stderr pipes, its pidfd);
    registering each with the loop's selector and removing it again cost about a tenth of
    the agent's per-job Python (asyncio's checks, its selector's bookkeeping), against one
    ``epoll_ctl`` each here. Level-triggered as the loop's own selector, so a callback that
    leaves data unread is called again. A watcher exists while it watches something: the
    last :meth:`forget` closes it (:func:`fd_watcher` makes the next one)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._epoll = select.epoll()
        self._callbacks: dict[int, Callable[[], None]] = {}
        loop.add_reader(self._epoll.fileno(), self._dispatch)

    def watch(self, fd: int, callback: Callable[[], None]) -> None:
        """Call ``callback()`` on the loop whenever ``fd`` is readable (or hung up)."""
        self._epoll.register(fd, select.EPOLLIN)
        self._callbacks[fd] = callback

    def forget(self, fd: int) -> None:
        """Stop watching ``fd`` (before it is closed: its number may be reused)."""
        if self._callbacks.pop(fd, None) is not None:
            self._epoll.unregister(fd)
        if not self._callbacks:
            self._loop.remove_reader(self._epoll.fileno())
            self._epoll.close()
            if _WATCHERS.get(self._loop) is self:
                del _WATCHERS[self._loop]

    def _dispatch(self) -> None:
        if self._epoll.closed:
            return
        for fd, _ in self._epoll.poll(0):
            callback = self._callbacks.get(fd)  # None: forgotten by an earlier callback
            if callback is None:
                continue
            try:
                callback()
            except Exception as exc:  # as the loop treats a failing reader: said, not fatal
                self._loop.call_exception_handler(
                    {"message": f"container fd {fd} callback failed", "exception": exc}
                )


#: the watcher of each event loop that watches containers now
_WATCHERS: dict[asyncio.AbstractEventLoop, FdWatcher] = {}


def fd_watcher(loop: asyncio.AbstractEventLoop) -> FdWatcher:
    """The watcher of ``loop``'s containers' descriptors (made when it has none)."""
    watcher = _WATCHERS.get(loop)
    if watcher is None:
        watcher = _WATCHERS[loop] = FdWatcher(loop)
    return watcher


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
        #: the output pipes not at their end yet: fd -> stream name
        self._open: dict[int, str] = {}
        #: set once every output pipe reached its end
        self._drained = asyncio.Event()
        self._buffers: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
        self._flush_scheduled = False
        self._timers: list[asyncio.TimerHandle] = []
        self._watcher = watcher = fd_watcher(loop)
        for stream_name, stream in (("stdout", handle.stdout), ("stderr", handle.stderr)):
            if stream is None:
                continue
            fd = stream.fileno()
            os.set_blocking(fd, False)
            self._open[fd] = stream_name
            watcher.watch(fd, functools.partial(self._read, fd, stream_name))
        if not self._open:
            self._drained.set()
        # the handle's own pidfd (it closes it when released): no second one per container
        self._pidfd = handle.pidfd
        watcher.watch(self._pidfd, self._on_exit)

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
        """Wait for the container to end and its output to be read to the end; what was not
        handed to the sink yet is, by :meth:`flush`."""
        await self._exited.wait()
        # most often the pipes reached their end in the same turn as the exit: no wait then
        if not self._drained.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._drained.wait(), DRAIN_TIMEOUT)
        for fd, stream_name in list(self._open.items()):
            # a process the container left behind still holds the pipe: take what is there
            self._closed(fd)
            self._read_rest(fd, stream_name)
        for timer in self._timers:
            timer.cancel()

    def flush(self) -> None:
        """Hand the output read so far to the sink."""
        self._flush()

    def exit_status(self) -> tuple[Any, dict[str, Any] | None]:
        """The ended container's exit status and metering, read on the loop (PID 1 has
        ended: nothing blocks); what it holds is freed by :meth:`release`."""
        handle = self.handle
        status = handle.ended_status()
        metering = None
        if handle.metering_enabled:
            try:
                counters = handle.metering()
                metering = counters.as_dict() if counters is not None else None
            except FuzzballError as exc:
                log.warning("run %d: metering unreadable: %s", self._run_id, exc)
        return status, metering

    def release(self) -> None:
        """Free the ended container's cgroups, image hold and record (blocking: a cgroup
        may take a moment to empty)."""
        try:
            self.handle.close()
        except Exception as exc:  # said, not raised: the run's outcome was already told
            log.warning(
                "run %d: the container's resources were not all freed: %s", self._run_id, exc
            )

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
            self._closed(fd)
            return
        buffer = self._buffers[stream_name]
        buffer += data
        if len(buffer) >= LOG_CHUNK:
            self._flush()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_later(LOG_FLUSH_DELAY, self._flush)

    def _closed(self, fd: int) -> None:
        """Output pipe ``fd`` needs no more watching (at its end, or given up on)."""
        self._watcher.forget(fd)
        del self._open[fd]
        if not self._open:
            self._drained.set()

    def _read_rest(self, fd: int, stream_name: str) -> None:
        with contextlib.suppress(OSError):
            while data := os.read(fd, LOG_CHUNK):
                self._buffers[stream_name] += data

    def _flush(self) -> None:
        self._flush_scheduled = False
        for stream_name, buffer in self._buffers.items():
            while buffer:
                chunk = bytes(buffer[:LOG_CHUNK])
                del buffer[:LOG_CHUNK]
                self._sink(self._run_id, stream_name, chunk)

    def _on_exit(self) -> None:
        self._watcher.forget(self._pidfd)
        self._pidfd = -1
        self._exited.set()


class ReleaseQueue:
    """Ended containers whose cgroups, image hold and record are still to be freed, freed in
    order by one task at a time on a thread pool.

    Each release went to the pool through ``run_in_executor`` of its own: a future pair, a
    thread's wake-up and the loop woken again at its end, for a result nobody awaits. Here a
    release while the pool's task is still at work is only appended, and the loop is not
    woken when it is done."""

    def __init__(self, pool: Executor) -> None:
        self._pool = pool
        self._lock = threading.Lock()
        self._pending: collections.deque[ContainerProcess] = collections.deque()
        self._draining = False

    def add(self, process: ContainerProcess) -> None:
        """Free ``process``'s resources soon, off the caller's thread."""
        with self._lock:
            self._pending.append(process)
            if self._draining:
                return
            self._draining = True
        try:
            self._pool.submit(self._drain)
        except BaseException:  # a pool shut down: nothing drains, so the next add tries again
            with self._lock:
                self._draining = False
            raise

    def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._pending:
                    self._draining = False
                    return
                process = self._pending.popleft()
            process.release()  # logs its failures, raises none


#: the release queue of each thread pool that frees containers
_RELEASES: weakref.WeakKeyDictionary[Executor, ReleaseQueue] = weakref.WeakKeyDictionary()
_RELEASES_LOCK = threading.Lock()


def release_queue(pool: Executor) -> ReleaseQueue:
    """The queue that frees ended containers on ``pool`` (made when it has none)."""
    with _RELEASES_LOCK:
        queue = _RELEASES.get(pool)
        if queue is None:
            queue = _RELEASES[pool] = ReleaseQueue(pool)
        return queue


def pool_call(
    loop: asyncio.AbstractEventLoop, pool: Executor, call: Callable[..., T], *args: Any
) -> asyncio.Future[T]:
    """``call(*args)`` on ``pool``, its result (or exception) set on a future of ``loop``:
    ``run_in_executor`` without its two chained futures. That wraps the pool's concurrent
    future in an asyncio one (``wrap_future``: callbacks copying state and cancellation
    both ways, in Python even on uvloop); here the pool's thread sets the loop's future
    itself through ``call_soon_threadsafe``, about 15 us less CPU per call (a start hop per
    job). As with ``run_in_executor``, a call whose future was cancelled before it began is
    not made, and the result of one cancelled while it ran is dropped."""
    future: asyncio.Future[T] = loop.create_future()

    def run() -> None:
        if future.cancelled():
            return
        try:
            result: T | None = call(*args)
            exc: BaseException | None = None
        except BaseException as raised:
            result, exc = None, raised
        with contextlib.suppress(RuntimeError):  # the loop was closed meanwhile
            loop.call_soon_threadsafe(_settle, future, result, exc)

    pool.submit(run)
    return future


def _settle(future: asyncio.Future[T], result: T | None, exc: BaseException | None) -> None:
    if future.cancelled():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)  # type: ignore[arg-type]


class ContainerDriver(TaskDriver):
    """A run whose work is one container; subclasses say how it is prepared (:meth:`start`)."""

    def __init__(self, request: RunRequest, node: NodeServices, sink: LogSink) -> None:
        super().__init__(request, node, sink)
        self.claims = RunClaims(node, request)
        self.process: ContainerProcess | None = None

    @abstractmethod
    async def start(self) -> RunOutcome | None:
        """Prepare the container and :meth:`launch` it; the outcome instead on failure."""

    async def launch(
        self,
        spec: ContainerSpec,
        *,
        hold_image: bool,
        timeout: float | None,
        late_env: Callable[[], Mapping[str, str]] | None = None,
    ) -> None:
        """Start the container (raises when it cannot), then watch it.

        ``hold_image`` keeps the image mounted between runs (jobs reuse images; a build's
        base is used once); ``timeout`` stops the run as timed out after that many seconds;
        ``late_env`` adds variables known only later (``Container.start``).
        """
        handle = await pool_call(
            self.loop, self.node.start_pool, self._start_container, spec, hold_image, late_env
        )
        self.started_at = time.time()
        for note in handle.warnings:
            log.warning("run %d: %s", self.request.run_id, note)
        self.process = ContainerProcess(handle, self.request.run_id, self.sink, self.loop)
        if self.stopping is not None:  # stopped while the container was being started
            self.process.terminate()
        elif timeout:
            self.process.later(timeout, self.stop, StopReason.TIMED_OUT, "")

    def _start_container(
        self,
        spec: ContainerSpec,
        hold_image: bool,
        late_env: Callable[[], Mapping[str, str]] | None,
    ) -> ContainerHandle:
        if hold_image and self.node.mount_holds is not None:
            self.node.mount_holds.hold(Path(spec.image))
        return Container(spec).start(late_env)

    async def wait(self) -> RunOutcome:
        """Wait for the container to end; logs are flushed before this returns."""
        process = self.process
        assert process is not None, "wait() after a start() that returned no outcome"
        await process.ended()
        self._container_ended()
        status, metering = process.exit_status()
        # Freed on the start pool, off the exit report's way: the hop there and back and
        # the cgroups' removal were most of the time from the exit to its report.
        release_queue(self.node.start_pool).add(process)
        # The last output is handed over only now, so that it goes to Orchestrate in the
        # same stream write as the exit report that follows on this turn of the loop: a
        # write of its own cost the agent about a quarter of a short job's GIL time.
        process.flush()
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
