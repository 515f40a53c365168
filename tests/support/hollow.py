"""Hollow nodes (after kubemark's): simulated Substrate agents that speak the real node API.

A :class:`HollowNode` registers, holds its ``Connect`` stream, sends heartbeats at the
interval its Welcome names (none while its stream is busy; every ``lease / 3`` if the
Welcome names none) and answers every assignment the way a real agent reports a run (``started``,
one log line counted with its ``seq`` as the agent counts output, ``exited``), without
starting anything: it is Orchestrate's side of a node that is measured, not the node's. Its
writes are taken as the agent takes them: ``started`` reports alone wait
:data:`~fuzzball_core.substrate.agent.STARTS_HELD_SECONDS` for what follows. It is built
from the real agent's parts: the protocol's messages (``api/v1/node.proto``), the agent's
:class:`~fuzzball_core.substrate.agent.Outbox` (the same in-order queue, taken only by the
current stream), its reconnect backoff, and
:class:`~fuzzball_core.substrate.drivers.RunOutcome` for the exit report.

A node made with ``hold_runs=True`` (or a stage's name) keeps every run (of that stage) it
is given running (until a ``Cancel`` or the Welcome's ``unknown_run_ids``), listing them
in its ``Hello`` after a reconnect as a real agent does: the restart benchmark holds its
running jobs that way.

:func:`run_fleet` runs many hollow nodes on one event loop over a few shared channels;
:func:`fleet_process` is that loop as a process's target (the benchmark starts a few), with
its counters in shared memory (:class:`FleetCounters`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import os
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc
from pyroute2 import netns

from fuzzball_core import __version__
from fuzzball_core.api.v1 import node_pb2, node_pb2_grpc
from fuzzball_core.config import NodeKeepaliveConfig
from fuzzball_core.keepalive import channel_options
from fuzzball_core.substrate.agent import (
    CHANNEL_OPTIONS,
    RECONNECT_BACKOFF,
    STABLE_STREAM,
    STARTS_HELD_SECONDS,
    Outbox,
    take_batch,
    writes,
)
from fuzzball_core.substrate.drivers import RunOutcome

log = logging.getLogger("fuzzball.hollow")

#: nodes sharing one gRPC channel (one HTTP/2 connection)
NODES_PER_CHANNEL = 250
#: the fleets' pings unless the cluster's configuration names others
DEFAULT_KEEPALIVE = NodeKeepaliveConfig()


@dataclass
class HollowStats:
    """What the nodes of one fleet did (summed over its nodes)."""

    registered: int = 0
    #: streams whose Welcome arrived (a reconnect counts again)
    welcomed: int = 0
    #: Welcomes on a stream already welcomed (Orchestrate lengthened the lease)
    retuned: int = 0
    heartbeats: int = 0
    assigned: int = 0
    exited: int = 0
    #: monotonic time of the latest Welcome
    last_welcome: float = 0.0
    #: runs the nodes hold running now (``hold_runs``)
    holding: int = 0


@dataclass
class HollowNode:
    """One simulated agent: register, Connect, heartbeats, instant (or held) runs."""

    stub: node_pb2_grpc.NodeAgentStub
    name: str
    token: str
    stats: HollowStats
    cores: int = 64
    memory: int = 256 << 30
    #: keep runs running instead of ending them: every run (True), or the runs of the
    #: stage of this name (``jobs.work``)
    hold_runs: bool | str = False
    log_line: bytes = b"hollow\n"
    lease_seconds: float = 15.0
    #: the Welcome's heartbeat interval (0: a heartbeat every lease / 3)
    heartbeat_seconds: float = 0.0
    node_id: str = ""
    #: run id -> its exit report once it ended (None while it runs)
    runs: dict[int, node_pb2.RunExited | None] = field(default_factory=dict)
    _outbox: Outbox = field(default_factory=Outbox)
    _live: int = 0
    _generation: int = 0
    #: the current stream's Orchestrate reads ``NodeBatch`` (its Welcome said so)
    _batches: bool = False

    @property
    def _metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.token}"),)

    async def run(self, stop: asyncio.Event) -> None:
        """Serve until ``stop`` is set, reconnecting (with the agent's backoff) whenever the
        stream ends."""
        delays = RECONNECT_BACKOFF.delays()
        while not stop.is_set():
            began = time.monotonic()
            session = asyncio.ensure_future(self._session())
            stopper = asyncio.ensure_future(stop.wait())
            await asyncio.wait({session, stopper}, return_when=asyncio.FIRST_COMPLETED)
            stopper.cancel()
            if not session.done():
                session.cancel()
                with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
                    await session
                return
            problem = session.exception()
            if problem is not None and not isinstance(problem, grpc.aio.AioRpcError):
                raise problem  # a fault of the hollow node itself, not Orchestrate going away
            log.info("hollow node %s: stream ended (%s); reconnecting", self.name, problem)
            # as the agent: only a session that stayed up starts the backoff over (the time
            # of the last Welcome would, after a flap, start it over at every failed
            # Register: every waiting node tried again every 0.2 s)
            if time.monotonic() - began > STABLE_STREAM:
                delays = RECONNECT_BACKOFF.delays()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), next(delays))

    async def _session(self) -> None:
        reply = await self.stub.Register(
            node_pb2.RegisterRequest(
                name=self.name,
                capacity=node_pb2.Resources(cores=self.cores, memory=self.memory),
                version=__version__,
                address="127.0.0.1",
            ),
            metadata=self._metadata,
        )
        self.stats.registered += 1
        self.node_id = reply.node_id
        self.lease_seconds = reply.lease_seconds or self.lease_seconds
        self._generation += 1
        generation = self._live = self._generation
        welcomed = asyncio.Event()
        call = self.stub.Connect(self._requests(generation, welcomed), metadata=self._metadata)
        beats = asyncio.ensure_future(self._heartbeats(welcomed))
        try:
            async for control in call:
                self._on_control(control, welcomed)
        finally:
            self._live = 0
            self._outbox.wake()
            beats.cancel()
            call.cancel()

    async def _requests(
        self, generation: int, welcomed: asyncio.Event
    ) -> AsyncIterator[node_pb2.NodeMessage]:
        yield node_pb2.NodeMessage(
            hello=node_pb2.Hello(
                node_id=self.node_id, running_run_ids=sorted(self.runs), accepts_batches=True
            )
        )
        await welcomed.wait()
        # what may not have arrived, in as few writes as the agent makes of it
        resends = deque(
            node_pb2.NodeMessage(exited=report)
            if report is not None
            else node_pb2.NodeMessage(started=node_pb2.RunStarted(run_id=run_id))
            for run_id, report in list(self.runs.items())
        )
        while resends:
            for write in writes(take_batch(resends), self._batches):
                yield write
        while True:
            messages = await self._outbox.take(
                lambda: generation == self._live, hold_starts=STARTS_HELD_SECONDS
            )
            if messages is None:
                return
            for write in writes(messages, self._batches):  # as the agent writes them
                yield write

    async def _heartbeats(self, welcomed: asyncio.Event) -> None:
        await welcomed.wait()
        while True:
            if self._outbox.heartbeat(self.heartbeat_seconds):  # none while the stream is busy
                self.stats.heartbeats += 1
            await asyncio.sleep(self.heartbeat_seconds or self.lease_seconds / 3)
            # delivered exit reports are forgotten after a lease, as the agent does
            for run_id in [r for r, report in self.runs.items() if report is not None]:
                del self.runs[run_id]

    def _on_control(self, control: node_pb2.ControlMessage, welcomed: asyncio.Event) -> None:
        kind = control.WhichOneof("kind")
        if kind == "batch":
            for each in control.batch.messages:
                self._on_control(each, welcomed)
        elif kind == "welcome":
            self.lease_seconds = control.welcome.lease_seconds or self.lease_seconds
            self.heartbeat_seconds = control.welcome.heartbeat_seconds
            self._batches = control.welcome.accepts_batches
            for run_id in control.welcome.unknown_run_ids:
                if self.runs.pop(run_id, 1) is None:
                    self.stats.holding -= 1
            if welcomed.is_set():
                self.stats.retuned += 1  # the same stream's lease lengthened, not a reconnect
                return
            self.stats.welcomed += 1
            self.stats.last_welcome = time.monotonic()
            welcomed.set()
        elif kind == "assign":
            self._assign(control.assign)
        elif kind == "cancel":
            run_id = control.cancel.run_id
            if run_id in self.runs and self.runs[run_id] is None:
                self.stats.holding -= 1
                self._exit(run_id, RunOutcome(exit_code=-1, signal=15, canceled=True))

    def _assign(self, assignment: node_pb2.Assignment) -> None:
        run_id = assignment.run_id
        if run_id in self.runs:
            return  # sent again after a reconnect
        self.stats.assigned += 1
        self.runs[run_id] = None
        self._outbox.put(
            node_pb2.NodeMessage(started=node_pb2.RunStarted(run_id=run_id, time=time.time()))
        )
        if self.hold_runs is True or self.hold_runs == assignment.stage_name:
            self.stats.holding += 1
            return
        if self.log_line:
            self._outbox.put(
                node_pb2.NodeMessage(
                    # the run's first chunk of output, counted as the agent counts it
                    log=node_pb2.LogData(run_id=run_id, stream="stdout", data=self.log_line, seq=1)
                )
            )
        self._exit(run_id, RunOutcome(exit_code=0))

    def _exit(self, run_id: int, outcome: RunOutcome) -> None:
        report = outcome.to_message(run_id)
        self.runs[run_id] = report
        self.stats.exited += 1
        self._outbox.put(node_pb2.NodeMessage(exited=report))


def channel(address: str, keepalive: NodeKeepaliveConfig) -> grpc.aio.Channel:
    """A plaintext channel to Orchestrate's gRPC port (tests and benchmarks: loopback), with
    the agent's options and its keepalive pings as ``keepalive`` (``orchestrate.node-keepalive``
    of the cluster: a server refuses pings more frequent than it expects)."""
    options = [*CHANNEL_OPTIONS, *channel_options(keepalive)]  # the agent's
    return grpc.aio.insecure_channel(address, options=options)


async def run_fleet(
    address: str,
    token: str,
    names: list[str],
    stop: asyncio.Event,
    stats: HollowStats,
    per_channel: int = NODES_PER_CHANNEL,
    keepalive: NodeKeepaliveConfig = DEFAULT_KEEPALIVE,
    **node_options: Any,
) -> None:
    """Run one hollow node per name until ``stop`` is set, ``per_channel`` a channel (1: a
    connection of its own each, as real agents have, for what is paid per connection).
    Registrations are spread over the first second so that they do not all arrive at once."""
    channels = [channel(address, keepalive) for _ in range(0, len(names), per_channel)]
    nodes = [
        HollowNode(
            node_pb2_grpc.NodeAgentStub(channels[i // per_channel]),
            name,
            token,
            stats,
            **node_options,
        )
        for i, name in enumerate(names)
    ]

    async def start(index: int, node: HollowNode) -> None:
        await asyncio.sleep(index / max(len(nodes), 1))
        await node.run(stop)

    try:
        await asyncio.gather(*(start(i, n) for i, n in enumerate(nodes)))
    finally:
        for open_channel in channels:
            await open_channel.close()


class FleetCounters:
    """A fleet process's :class:`HollowStats`, readable from the parent (shared memory)."""

    FIELDS = (
        "registered",
        "welcomed",
        "retuned",
        "heartbeats",
        "assigned",
        "exited",
        "holding",
    )

    def __init__(self) -> None:
        self.values = multiprocessing.Array("d", len(self.FIELDS) + 1, lock=False)

    def publish(self, stats: HollowStats) -> None:
        for index, name in enumerate(self.FIELDS):
            self.values[index] = getattr(stats, name)
        self.values[len(self.FIELDS)] = stats.last_welcome

    def read(self) -> HollowStats:
        numbers = {name: int(self.values[i]) for i, name in enumerate(self.FIELDS)}
        return HollowStats(**numbers, last_welcome=self.values[len(self.FIELDS)])


def fleet_process(
    address: str,
    token: str,
    names: list[str],
    counters: FleetCounters,
    stop: Any,
    node_options: dict[str, Any],
    namespace: str = "",
) -> None:
    """A process's target: run the fleet until the ``stop`` (a multiprocessing Event) is
    set, publishing its counters ten times a second (``node_options``: :func:`run_fleet`'s
    keywords, ``per_channel`` and ``keepalive``, and the nodes'); in network namespace ``namespace``
    when one is named (entered before any socket is made). ``FUZZBALL_HOLLOW_LOG=INFO``
    shows each node's reconnects."""
    if namespace:
        netns.setns(namespace)
    logging.basicConfig(
        level=os.environ.get("FUZZBALL_HOLLOW_LOG", "WARNING"),
        format="%(asctime)s %(name)s %(message)s",
    )

    async def main() -> None:
        stats = HollowStats()
        done = asyncio.Event()

        async def publish() -> None:
            while True:
                counters.publish(stats)
                if stop.is_set():
                    done.set()
                    return
                await asyncio.sleep(0.1)

        publisher = asyncio.ensure_future(publish())
        await run_fleet(address, token, names, done, stats, **node_options)
        publisher.cancel()
        counters.publish(stats)

    asyncio.run(main())
