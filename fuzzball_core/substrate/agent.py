"""The node agent: registration, the Connect stream, lease heartbeats, reconnects.

The agent dials Orchestrate, registers this machine's resources (or the limits in its
configuration) and holds one bidirectional ``Connect`` stream. Its first message on every
stream is a ``Hello`` listing every run it still knows: running ones, and finished ones whose
``RunExited`` may not have reached the database yet. After Orchestrate's ``Welcome`` (which
names runs to kill and forget) the agent re-sends the state of the runs it knows, then
streams heartbeats, run starts, output and exits while it executes the assignments it
receives.

The agent's health is served on its metrics port (``/healthz``, ``/readyz``): ready once it is
registered and its stream is up (Orchestrate's ``Welcome`` came), with its heartbeat loop
passing (:func:`~fuzzball_core.health.keep_running`: a turn that raises is logged and
retried, never ends the heartbeats).

When the stream breaks (Orchestrate restarted, network trouble) the containers keep running;
the agent re-registers and reconnects with exponential backoff, and the Hello/Welcome
exchange reconciles both sides (the Hello also names the workflows whose directories the
node keeps, and Orchestrate answers with a ``WorkflowEnded`` for those that ended meanwhile).
A finished run's report is kept until it was sent on a stream that then stayed up for
``2 * lease`` seconds, so no result is lost to a crash of Orchestrate; duplicates are
ignored on the other side.

A ``Shutdown`` (the node carries a deprovision hold and is empty) winds the agent down: it
takes no more work, stops whatever Orchestrate no longer counts as running here (an evicted
container still being killed), sends what is left in its outbox, half-closes the stream and
waits for Orchestrate to end it, then :meth:`Agent.run` returns and the process exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import socket
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from fuzzball_core import __version__
from fuzzball_core.api.v1 import node_pb2, node_pb2_grpc
from fuzzball_core.backoff import Backoff
from fuzzball_core.config import FuzzballConfig
from fuzzball_core.drivers import VolumeLocation
from fuzzball_core.errors import FailedPrecondition, FuzzballError
from fuzzball_core.health import Health, describe, health_routes, keep_running
from fuzzball_core.keepalive import channel_options
from fuzzball_core.plugins import PluginRegistry
from fuzzball_core.scheduling import CpuCore
from fuzzball_core.spec.models import Probe
from fuzzball_core.spec.resources import job_resources
from fuzzball_core.substrate.devices import DevicePool, device_annotations, discover_devices
from fuzzball_core.substrate.drivers import (
    NodeServices,
    RunOutcome,
    RunRequest,
    StopReason,
    TaskDriver,
    driver_for,
)
from fuzzball_core.substrate.images import NodeImages
from fuzzball_core.substrate.metrics import MetricsServer, Sample, advertised, hook_samples
from fuzzball_core.substrate.mount_holds import ImageMountHolds
from fuzzball_core.substrate.network import NodeNetwork, node_address
from fuzzball_core.substrate.node_exporter import NodeExporter
from fuzzball_core.substrate.pmi import FenceClient
from fuzzball_core.substrate.probes import wait_until_ready
from fuzzball_core.substrate.run_secrets import RunSecretsClient
from fuzzball_core.substrate.scrape_relay import answer_scrape
from fuzzball_core.substrate.topology import pinnable_cores
from fuzzball_core.substrate.volume_sizes import measured
from fuzzball_core.substrate.volumes import WorkflowVolumes
from fuzzball_core.tls import grpc_channel_credentials
from fuzzball_runtime import (
    MetadataGuardError,
    capabilities,
    check_metadata_guard,
    release_kept_cgroups,
    sweep,
)
from fuzzball_runtime.network import DEFAULT_SUBNET

log = logging.getLogger("fuzzball.substrate")

#: the setting of the jobs' capabilities, as errors name it
JOB_CAPABILITIES = "substrate.job-capabilities"

#: Reconnect backoff (seconds), spread by a fifth either way so that nodes restarted
#: together do not knock on Orchestrate in step. Capped well inside a lease (15 s at the
#: least): after a restart every node has to be back within one, and the cap is what a node
#: may still wait after Orchestrate serves again.
RECONNECT_BACKOFF = Backoff(initial=0.2, factor=2.0, maximum=2.5, jitter=0.2)
#: The longest gRPC's own reconnect backoff waits (seconds). Its default grows to two minutes
#: while Orchestrate is away, and every Register fails at once until the channel's next
#: attempt, so after a restart that took a minute nodes came back a minute after Orchestrate
#: served again, past their lease; held to the agent's cap, the two waits still added up (a
#: node back 11 s after serving with 5 s each), so the channel's is shorter: its attempts
#: are a TCP connect each.
CHANNEL_RECONNECT_MAXIMUM = 1.0
#: The channel to Orchestrate.
CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", 64 << 20),
    ("grpc.initial_reconnect_backoff_ms", int(RECONNECT_BACKOFF.initial * 1000)),
    ("grpc.min_reconnect_backoff_ms", int(RECONNECT_BACKOFF.initial * 1000)),
    ("grpc.max_reconnect_backoff_ms", int(CHANNEL_RECONNECT_MAXIMUM * 1000)),
]
#: The heartbeat loop's retry after a turn that raised.
UPKEEP_RETRY = Backoff(initial=0.2, factor=2.0, maximum=5.0)
#: The agent's health conditions (``/readyz`` on the metrics port).
REGISTERED, STREAM, HEARTBEATS = "registered", "stream", "heartbeats"
#: A stream that stayed up this long resets the backoff.
STABLE_STREAM = 10.0
#: Seconds a deprovisioned agent gives its last containers to end, and Orchestrate to end
#: the stream after the agent half-closed it.
WIND_DOWN_RUNS = 10.0
WIND_DOWN_STREAM = 5.0
#: The most kept workflow directories one Hello asks Orchestrate about (a few hundred KiB;
#: the rest are asked about on a later reconnect or meet the backstop).
KEPT_WORKFLOWS_ASKED = 10_000


def machine_memory() -> int:
    """Bytes of RAM on this machine (``MemTotal``)."""
    with open("/proc/meminfo", encoding="ascii") as meminfo:
        for line in meminfo:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return 0


@dataclass
class NodeIdentity:
    """What the agent registers as."""

    name: str
    cores: int
    memory: int
    devices: dict[str, int]
    annotations: dict[str, str]
    device_plugin_failed: bool
    #: the cores jobs can be pinned to (empty: none can)
    cpu_topology: tuple[CpuCore, ...] = ()


@dataclass
class KnownRun:
    """A run this node was given and has not forgotten yet."""

    request: RunRequest
    execution: TaskDriver | None = None
    started: bool = False
    #: a service whose readiness probe passed
    ready: bool = False
    outcome: RunOutcome | None = None
    #: stream generation and time the outcome was last sent on
    reported_on: int = -1
    reported_at: float = 0.0
    #: Orchestrate no longer wants this run: stop it and report nothing
    forgotten: bool = False
    #: the ``LogData.seq`` of the run's last output chunk
    output_seq: int = 0
    #: counted output no ``LogsStored`` has covered yet, oldest first: a stream that breaks
    #: may lose what it carried, or Orchestrate may stop before its pass stores it, so this
    #: is sent again on the next stream (kept only for an Orchestrate that acknowledges)
    unstored_output: deque[node_pb2.NodeMessage] = field(default_factory=deque)

    def output_stored(self, through_seq: int) -> None:
        """Orchestrate stored the run's output up to ``through_seq``: stop keeping it."""
        unstored = self.unstored_output
        while unstored and unstored[0].log.seq <= through_seq:
            unstored.popleft()


class Outbox:
    """Messages for Orchestrate, in order, kept while no stream is up.

    Only the current stream's request generator takes messages: a generator of a stream
    that broke may still be waiting here, and must not swallow what the next stream sends.
    """

    def __init__(self) -> None:
        self._messages: deque[node_pb2.NodeMessage] = deque()
        self._ready = asyncio.Event()
        self._closed = False
        #: monotonic time a stream last took messages (each renews the node's lease)
        self.last_taken = 0.0

    def put(self, message: node_pb2.NodeMessage) -> None:
        self._messages.append(message)
        self._ready.set()

    def heartbeat(self, heartbeat_seconds: float) -> bool:
        """Queue a heartbeat for this upkeep turn and return True, unless the Welcome named a
        ``heartbeat_seconds`` (Orchestrate renews the lease on any message) and a stream took
        messages in the last half interval: a busy node sends none, and the lease (three
        intervals) still sees a message within two."""
        if heartbeat_seconds and time.monotonic() - self.last_taken < heartbeat_seconds / 2:
            return False
        self.put(node_pb2.NodeMessage(heartbeat=node_pb2.Heartbeat()))
        return True

    def wake(self) -> None:
        """Make waiting takers check whether they are still current."""
        self._ready.set()

    def discard(self, messages: list[node_pb2.NodeMessage]) -> None:
        """Take these messages (the very objects) out of the queue: they are being sent
        another way."""
        if messages and self._messages:
            gone = {id(message) for message in messages}
            self._messages = deque(m for m in self._messages if id(m) not in gone)

    def close(self) -> None:
        """No more messages will come: takers get None once the queue is drained."""
        self._closed = True
        self._ready.set()

    async def take(
        self, still_current: Callable[[], bool], hold_starts: float = 0.0
    ) -> list[node_pb2.NodeMessage] | None:
        """The messages waiting now, oldest first (at least one, at most what
        :func:`batch_of` lets through one write), or None once ``still_current()`` turned
        false or the outbox was closed and drained.

        When every message waiting is a ``started`` report, they wait ``hold_starts``
        seconds for what follows (a short job's exit, the next starts) to share their write:
        per separate workflow a start and its exit went in writes of their own, each one more
        message for Orchestrate to read. The reports carry the agent's own times, and
        nothing else is ever held."""
        while True:
            if not still_current():
                return None
            if self._messages:
                if hold_starts and all(m.WhichOneof("kind") == "started" for m in self._messages):
                    await asyncio.sleep(hold_starts)
                    if not still_current():
                        return None  # they stay queued for the next stream
                self.last_taken = time.monotonic()
                return take_batch(self._messages)
            if self._closed:
                return None
            self._ready.clear()
            await self._ready.wait()


#: How long a write of ``started`` reports alone waits for more (an exit, other starts).
STARTS_HELD_SECONDS = 0.002

#: What one stream write carries at most: far below Orchestrate's 4 MiB receive limit, and
#: enough messages that a busy node writes a few times per pass instead of once per message.
BATCH_MESSAGES = 512
BATCH_BYTES = 1 << 20


def _payload_bytes(message: node_pb2.NodeMessage) -> int:
    """The bytes of a message that can be large (output, relayed metrics); the rest are a
    few dozen bytes, which the message count bounds."""
    kind = message.WhichOneof("kind")
    if kind == "log":
        return len(message.log.data)
    if kind == "metrics":
        return len(message.metrics.text)
    return 0


def take_batch(messages: deque[node_pb2.NodeMessage]) -> list[node_pb2.NodeMessage]:
    """Pop the oldest messages that fit one write (:data:`BATCH_MESSAGES`,
    :data:`BATCH_BYTES`); always at least one, however large."""
    taken = [messages.popleft()]
    size = _payload_bytes(taken[0])
    while messages and len(taken) < BATCH_MESSAGES:
        size += _payload_bytes(messages[0])
        if size > BATCH_BYTES:
            break
        taken.append(messages.popleft())
    return taken


def batch_of(messages: list[node_pb2.NodeMessage]) -> node_pb2.NodeMessage:
    """One stream write's message: the message itself when alone, else a ``NodeBatch``."""
    if len(messages) == 1:
        return messages[0]
    return node_pb2.NodeMessage(batch=node_pb2.NodeBatch(messages=messages))


def writes(messages: list[node_pb2.NodeMessage], batches: bool) -> list[node_pb2.NodeMessage]:
    """What goes on the stream for ``messages``: one batch when Orchestrate's Welcome said
    it reads them, else each message alone (an older Orchestrate would drop a batch)."""
    return [batch_of(messages)] if batches else messages


class Agent:
    """One ``fuzzball-substrate``."""

    #: the fuzzball_node_* endpoint while the agent runs (also answers relayed scrapes)
    metrics_server: MetricsServer | None = None

    def __init__(self, config: FuzzballConfig, registry: PluginRegistry) -> None:
        self.config = config
        settings = config.substrate
        self.work_dir = Path(settings.work_dir or config.data_dir / "substrate")
        self.registry = registry
        self.address = settings.orchestrate_address
        self._metadata = (("authorization", f"Bearer {settings.node_token}"),)
        node_config = settings.model_dump(mode="json", by_alias=True)
        devices, plugin_failed = discover_devices(registry.hook, node_config)
        self.devices = DevicePool(devices, settings.devices)
        self.identity = NodeIdentity(
            name=settings.node_name or socket.gethostname(),
            cores=settings.cores or os.cpu_count() or 1,
            memory=settings.memory or machine_memory(),
            devices=self.devices.capacity(),
            # the devices' (an NVLink domain), then the configured ones, which win
            annotations={**device_annotations(devices), **settings.annotations},
            device_plugin_failed=plugin_failed,
            cpu_topology=pinnable_cores(settings.cores),
        )
        threads = max(4, min(16, 4 * (os.cpu_count() or 1)))
        self.services = NodeServices(
            images=NodeImages(registry, _images_config(config), self.work_dir / "cache"),
            volumes=WorkflowVolumes(self.work_dir, retention=settings.workflow_volume_retention),
            devices=self.devices,
            hooks=registry.hook,
            state_dir=self.work_dir / "runtime",
            runs_dir=self.work_dir / "runs",
            start_pool=ThreadPoolExecutor(threads, thread_name_prefix="container"),
            pull_pool=ThreadPoolExecutor(4, thread_name_prefix="image-pull"),
            metering=settings.metering,
            mount_holds=ImageMountHolds(self.work_dir / "runtime"),
            network=NodeNetwork(
                address=node_address(settings.address, settings.orchestrate_address),
                job_subnet=settings.job_subnet or DEFAULT_SUBNET,
                metadata_guard=settings.metadata_guard,
            ),
            capabilities=capabilities.configured(settings.job_capabilities, JOB_CAPABILITIES),
        )
        self.node_id = ""
        self.lease_seconds = config.orchestrate.node_lease
        #: the Welcome's heartbeat interval (0: an Orchestrate that did not name one, which
        #: takes a heartbeat every lease / 3 and renews the lease on nothing else)
        self.heartbeat_seconds = 0.0
        self.runs: dict[int, KnownRun] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._outbox = Outbox()
        self._fences = FenceClient(self._send)
        self._generation = 0
        #: generation of the stream that is up, 0 while none is
        self._live = 0
        self._welcomed = asyncio.Event()
        #: the current stream's Orchestrate reads ``NodeBatch`` (its Welcome said so)
        self._batches = False
        #: Orchestrate answers counted output with ``LogsStored`` (its Welcome said so): the
        #: output is kept until then and sent again after a reconnect
        self._output_acknowledged = False
        #: the current stream's Orchestrate sends ``WorkflowEnded`` (its Welcome said so):
        #: while it is connected no workflow directory is removed before it says so
        self._workflow_ends_told = False
        #: why Orchestrate deprovisioned this node, once it sent ``Shutdown``
        self.deprovisioned: str | None = None
        self._call: grpc.aio.StreamStreamCall | None = None
        self._wind_down_task: asyncio.Task[None] | None = None
        self.health = Health("substrate")
        self.health.declare(REGISTERED, f"not registered with {self.address} yet")
        self.health.declare(STREAM, f"no stream to {self.address} yet")
        self.health.declare(HEARTBEATS, "no stream to send heartbeats on yet", required=False)

    # -- start-up ------------------------------------------------------------------------------

    def prepare_node(self) -> None:
        """Free what a previous agent in this work directory left behind."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        report = sweep(self.services.state_dir)
        if report.killed or report.records:
            log.warning("swept %d leftover containers of a previous agent", len(report.records))
        shutil.rmtree(self.services.runs_dir, ignore_errors=True)
        self.services.runs_dir.mkdir(parents=True)
        self.services.volumes.adopt_leftovers(time.time())

    def collect_metrics(self) -> list[Sample]:
        """This node's samples: the metrics hooks' and the agent's own."""
        results = self.registry.hook.fuzzball_node_collect_metrics(node_id=self.node_id)
        identity = self.identity
        samples = hook_samples(results)
        samples += [
            Sample(
                "fuzzball_node_running_jobs",
                len(self.runs),
                help="Runs this node holds: running, or finished and not yet reported.",
            ),
            Sample(
                "fuzzball_node_connected",
                1 if self._live else 0,
                help="1 while the node's stream to Orchestrate is up.",
            ),
            Sample(
                "fuzzball_node_device_plugin_failed",
                1 if identity.device_plugin_failed else 0,
                help="1 when a device plugin failed while the node discovered its devices.",
            ),
            Sample(
                "fuzzball_node_allocatable_cores",
                identity.cores,
                help="Cores this node offers to jobs.",
            ),
            Sample(
                "fuzzball_node_allocatable_memory_bytes",
                identity.memory,
                help="Bytes of memory this node offers to jobs.",
            ),
        ]
        samples += [
            Sample(
                "fuzzball_node_allocatable_devices",
                count,
                labels={"device": kind},
                help="Devices of each kind this node offers to jobs.",
            )
            for kind, count in identity.devices.items()
        ]
        return samples + self._allocated_samples()

    def _allocated_samples(self) -> list[Sample]:
        """What the runs still running here asked for (image work asks for nothing)."""
        cores = memory = 0
        devices = dict.fromkeys(self.identity.devices, 0)
        for known in self.runs.values():
            if known.outcome is not None or known.request.job is None:
                continue
            wanted = job_resources(known.request.job)
            cores += wanted.cores
            memory += wanted.memory
            for kind, count in wanted.devices.items():
                devices[kind] = devices.get(kind, 0) + count
        return [
            Sample("fuzzball_node_allocated_cores", cores, help="Cores held by running jobs."),
            Sample(
                "fuzzball_node_allocated_memory_bytes",
                memory,
                help="Bytes of memory held by running jobs.",
            ),
        ] + [
            Sample(
                "fuzzball_node_allocated_devices",
                count,
                labels={"device": kind},
                help="Devices of each kind held by running jobs.",
            )
            for kind, count in devices.items()
        ]

    async def run(self, stop: asyncio.Event) -> None:
        """Serve Orchestrate until ``stop`` is set, reconnecting whenever the stream ends."""
        self.prepare_node()
        metrics = MetricsServer(
            self.config.node_metrics_listen,
            self.collect_metrics,
            routes=health_routes(self.health),
        )
        self.metrics_server = metrics if metrics.listen else None
        await metrics.start()
        exporter = NodeExporter(self.config.node_exporter_listen, self.health)
        exporter.start()
        try:
            await self._serve(stop)
        finally:
            await exporter.stop()
            await metrics.stop()

    async def _serve(self, stop: asyncio.Event) -> None:
        # keepalive pings as Orchestrate's server expects them (orchestrate.node-keepalive)
        options = [*CHANNEL_OPTIONS, *channel_options(self.config.orchestrate.node_keepalive)]
        delays = RECONNECT_BACKOFF.delays()
        # TLS verifying Orchestrate's certificate against tls.ca-file, unless tls.plaintext
        credentials = grpc_channel_credentials(self.config.tls)
        channel = (
            grpc.aio.insecure_channel(self.address, options=options)
            if credentials is None
            else grpc.aio.secure_channel(self.address, credentials, options=options)
        )
        async with channel:
            stub = node_pb2_grpc.NodeAgentStub(channel)
            self.services.run_secrets = RunSecretsClient(
                stub, self._metadata, lambda: self.node_id
            ).fetch
            while not stop.is_set():
                began = time.monotonic()
                session = asyncio.ensure_future(self._session(stub))
                stopper = asyncio.ensure_future(stop.wait())
                await asyncio.wait({session, stopper}, return_when=asyncio.FIRST_COMPLETED)
                stopper.cancel()
                if not session.done():
                    session.cancel()
                    break
                if self.deprovisioned is not None:
                    break  # the stream ended because this node is being torn down
                problem = session.exception()
                if problem is not None and not isinstance(problem, grpc.aio.AioRpcError):
                    log.error("connection to %s failed: %r", self.address, problem)
                elif problem is not None:
                    self._log_rpc_error(problem)
                if time.monotonic() - began > STABLE_STREAM:
                    delays = RECONNECT_BACKOFF.delays()  # a stable stream starts over
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), next(delays))
        if self._wind_down_task is not None:
            self._wind_down_task.cancel()
        await self._shutdown()
        if self.deprovisioned is not None:
            log.info(
                "node %s was deprovisioned by Orchestrate (%s); the agent exits",
                self.identity.name,
                self.deprovisioned,
            )

    def _log_rpc_error(self, error: grpc.aio.AioRpcError) -> None:
        code = error.code()
        if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.FAILED_PRECONDITION):
            log.error("Orchestrate at %s refused this node: %s", self.address, error.details())
        else:
            log.info("Orchestrate at %s unavailable (%s); reconnecting", self.address, code.name)

    async def _shutdown(self) -> None:
        for known in self.runs.values():
            if known.execution is not None and known.outcome is None:
                known.execution.stop(StopReason.CANCELED, "the node agent stopped")
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=10)
        self.services.start_pool.shutdown(wait=False, cancel_futures=True)
        self.services.pull_pool.shutdown(wait=False, cancel_futures=True)
        # a clean stop leaves nothing behind: no image mounts, no kept job groups, no cgroup
        # parents
        if self.services.mount_holds is not None:
            self.services.mount_holds.release_all()
        release_kept_cgroups()
        report = sweep(self.services.state_dir)
        if report.killed:
            log.warning("stopped %d containers still running at shutdown", len(report.killed))

    # -- the stream ----------------------------------------------------------------------------

    async def _register(self, stub: node_pb2_grpc.NodeAgentStub) -> None:
        identity = self.identity
        try:
            reply = await self._register_call(stub, identity)
        except Exception as exc:
            self.health.failed(REGISTERED, f"registering with {self.address}: {describe(exc)}")
            raise
        self.node_id = reply.node_id
        self.lease_seconds = reply.lease_seconds or self.lease_seconds
        self.health.passed(REGISTERED, f"node {self.node_id} registered with {self.address}")

    async def _register_call(
        self, stub: node_pb2_grpc.NodeAgentStub, identity: NodeIdentity
    ) -> node_pb2.RegisterResponse:
        return await stub.Register(
            node_pb2.RegisterRequest(
                name=identity.name,
                capacity=node_pb2.Resources(
                    cores=identity.cores, memory=identity.memory, devices=identity.devices
                ),
                annotations=identity.annotations,
                device_plugin_failed=identity.device_plugin_failed,
                version=__version__,
                address=self.services.network.address,
                cpu_cores=[
                    node_pb2.CpuCore(
                        id=core.id, socket=core.socket, numa=core.numa, threads=core.threads
                    )
                    for core in identity.cpu_topology
                ],
                metrics_address=advertised(self.config.node_metrics_listen, self._address),
                node_exporter_address=advertised(self.config.node_exporter_listen, self._address),
                health_disabled=self.config.health.disabled,
            ),
            metadata=self._metadata,
        )

    async def _session(self, stub: node_pb2_grpc.NodeAgentStub) -> None:
        # Registering again on every connection is idempotent (same name, same id) and puts
        # the node back in the scheduler of an Orchestrate that restarted meanwhile.
        await self._register(stub)
        self._generation += 1
        generation = self._live = self._generation
        self._welcomed = asyncio.Event()
        self._workflow_ends_told = False  # until this stream's Welcome says otherwise
        call = self._call = stub.Connect(self._requests(generation), metadata=self._metadata)
        upkeep = asyncio.create_task(
            keep_running(
                HEARTBEATS,
                lambda: self._upkeep(generation),
                health=self.health,
                retry=UPKEEP_RETRY,
                logger=log,
            )
        )
        ended = "Orchestrate closed it"
        try:
            async for control in call:
                self._on_control(control)
            if self.deprovisioned is None:
                log.info("Orchestrate closed the stream; reconnecting")
        except BaseException as exc:
            ended = describe(exc)
            raise
        finally:
            self.health.failed(STREAM, f"the stream to {self.address} ended ({ended})")
            self.health.failed(HEARTBEATS, "no stream to send heartbeats on")
            self._live = 0
            self._outbox.wake()  # the broken stream's generator stops taking messages
            upkeep.cancel()
            call.cancel()
            self._call = None

    async def _requests(self, generation: int) -> AsyncIterator[node_pb2.NodeMessage]:
        yield node_pb2.NodeMessage(
            hello=node_pb2.Hello(
                node_id=self.node_id,
                running_run_ids=sorted(self.runs),
                accepts_batches=True,
                # Orchestrate answers with the ones that ended while it could not tell us
                workflow_ids=self.services.volumes.kept(KEPT_WORKFLOWS_ASKED),
            )
        )
        await self._welcomed.wait()
        batches = self._batches
        resends = deque(self._resends(generation))
        while resends:
            for write in writes(take_batch(resends), batches):
                yield write
        while True:
            # Everything queued since the last write goes in one: a stream write costs far
            # more than its bytes (it was a quarter of the agent's CPU with one per message).
            messages = await self._outbox.take(
                lambda: generation == self._live, hold_starts=STARTS_HELD_SECONDS
            )
            if messages is None:
                return  # this stream ended; what is left goes on the next one
            for message in messages:
                if message.WhichOneof("kind") == "exited":
                    self._mark_reported(message.exited.run_id, generation)
            for write in writes(messages, batches):
                yield write

    def _resends(self, generation: int) -> list[node_pb2.NodeMessage]:
        """Run starts, output and exits Orchestrate may have missed while the stream was
        down (output it has not said it stored is taken out of the outbox, which may hold
        some of it, and sent here in order, before its run's exit)."""
        messages = []
        output = [m for known in self.runs.values() for m in known.unstored_output]
        self._outbox.discard(output)
        for run_id, known in self.runs.items():
            if known.outcome is None and known.started:
                messages.append(
                    node_pb2.NodeMessage(
                        started=node_pb2.RunStarted(run_id=run_id, time=time.time())
                    )
                )
                if known.ready:
                    messages.append(
                        node_pb2.NodeMessage(
                            ready=node_pb2.RunReady(run_id=run_id, time=time.time())
                        )
                    )
            messages.extend(known.unstored_output)
            if known.outcome is not None:
                messages.append(node_pb2.NodeMessage(exited=known.outcome.to_message(run_id)))
                known.reported_on, known.reported_at = generation, time.monotonic()
        return messages + self._fences.unanswered()

    def _mark_reported(self, run_id: int, generation: int) -> None:
        known = self.runs.get(run_id)
        if known is not None:
            known.reported_on, known.reported_at = generation, time.monotonic()

    async def _upkeep(self, generation: int) -> None:
        """One heartbeat turn (every heartbeat interval, or lease/3): a heartbeat unless the
        stream was busy (:meth:`Outbox.heartbeat`), then forgetting delivered results and
        expiring volumes. Run by :func:`~fuzzball_core.health.keep_running`, so a turn that
        raises is logged and the heartbeats go on."""
        self._outbox.heartbeat(self.heartbeat_seconds)
        await asyncio.sleep(max(self.heartbeat_seconds or self.lease_seconds / 3, 0.05))
        settled = time.monotonic() - 2 * self.lease_seconds
        for run_id in [
            run_id
            for run_id, known in self.runs.items()
            if known.outcome is not None
            and known.reported_on == generation
            and known.reported_at <= settled
        ]:
            del self.runs[run_id]
        self.services.workflow_tokens.keep_only(
            {known.request.workflow_id for known in self.runs.values() if known.outcome is None}
        )
        if self._workflow_ends_told and generation == self._live:
            self.services.volumes.vouch(time.time())
        # removing ended and expired workflows' directories blocks (~0.3-0.7 ms a workflow):
        # never on the loop, which starts and reports every run of the node
        await asyncio.to_thread(self.services.volumes.expire, time.time())

    def _send(self, message: node_pb2.NodeMessage) -> None:
        self._outbox.put(message)

    # -- control messages ----------------------------------------------------------------------

    def _on_control(self, control: node_pb2.ControlMessage) -> None:
        kind = control.WhichOneof("kind")
        if kind == "batch":  # what Orchestrate had queued for this node, in order
            for each in control.batch.messages:
                self._on_control(each)
        elif kind == "assign":
            self._assign(control.assign)
        elif kind == "cancel":
            known = self.runs.get(control.cancel.run_id)
            if known is not None and known.execution is not None and known.outcome is None:
                known.execution.stop(StopReason.CANCELED)
        elif kind == "welcome":
            self.health.passed(STREAM, f"stream to {self.address} up")
            self.lease_seconds = control.welcome.lease_seconds or self.lease_seconds
            self.heartbeat_seconds = control.welcome.heartbeat_seconds
            self._batches = control.welcome.accepts_batches
            self._output_acknowledged = control.welcome.acknowledges_logs
            self._workflow_ends_told = control.welcome.tells_workflow_ends
            for run_id in control.welcome.unknown_run_ids:
                self._forget(run_id)
            self._welcomed.set()
        elif kind == "shutdown":
            self._begin_wind_down(control.shutdown.reason or "deprovisioned")
        elif kind == "fence_done":
            self._fences.done(control.fence_done)
        elif kind == "scrape":
            self._spawn(self._answer_scrape(control.scrape))
        elif kind == "remove_volume":
            self._spawn(self._remove_volume(control.remove_volume))
        elif kind == "workflow_ended":  # removed at the next upkeep turn, off the loop
            self.services.volumes.end(control.workflow_ended.workflow_ids)
        elif kind == "logs_stored":
            for run_id, seq in control.logs_stored.through_seq.items():
                stored = self.runs.get(run_id)
                if stored is not None:
                    stored.output_stored(seq)

    async def _remove_volume(self, request: node_pb2.RemoveVolume) -> None:
        """Delete a deleted volume's data here and tell Orchestrate how that went."""
        error = ""
        try:
            location = VolumeLocation.from_json(json.loads(request.location_json))
            await asyncio.to_thread(self.services.volumes.remove, location)
        except (FuzzballError, OSError, ValueError, KeyError) as exc:
            error = str(exc)
            log.warning("volume %s: its data could not be removed: %s", request.volume_id, error)
        self._send(
            node_pb2.NodeMessage(
                volume_removed=node_pb2.VolumeRemoved(volume_id=request.volume_id, error=error)
            )
        )

    async def _answer_scrape(self, request: node_pb2.ScrapeMetrics) -> None:
        exporter = advertised(self.config.node_exporter_listen, "127.0.0.1")
        self._send(await answer_scrape(request, self.metrics_server, exporter))

    @property
    def _address(self) -> str:
        """This node's address as others reach it (for the metrics endpoints' targets)."""
        return self.services.network.address

    def _begin_wind_down(self, reason: str) -> None:
        if self.deprovisioned is not None:
            return  # said twice (a reconnect raced the first one): one wind-down is enough
        self.deprovisioned = reason
        log.info(
            "Orchestrate is deprovisioning node %s (%s): taking no more work",
            self.identity.name,
            reason,
        )
        self._wind_down_task = asyncio.create_task(self._wind_down())

    async def _wind_down(self) -> None:
        """Finish this node's part and close the stream cleanly (see the module's doc)."""
        # Orchestrate counts the node empty: anything still running here is a run it has
        # already ended (an evicted container being killed), so it is stopped, not awaited.
        for known in self.runs.values():
            if known.execution is not None and known.outcome is None:
                known.execution.stop(StopReason.CANCELED, "the node was deprovisioned")
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=WIND_DOWN_RUNS)
        # The request stream ends once the outbox is drained; Orchestrate then ends its side.
        self._outbox.close()
        await asyncio.sleep(WIND_DOWN_STREAM)
        if self._call is not None:
            log.warning("Orchestrate did not end the stream of a deprovisioned node; closing it")
            self._call.cancel()

    def _forget(self, run_id: int) -> None:
        known = self.runs.pop(run_id, None)
        if known is None:
            return
        known.forgotten = True
        if known.execution is not None and known.outcome is None:
            log.info("run %d is no longer wanted by Orchestrate; stopping it", run_id)
            known.execution.stop(StopReason.CANCELED)

    def _assign(self, assignment: node_pb2.Assignment) -> None:
        if assignment.run_id in self.runs:
            return  # sent again after a reconnect: it is already ours
        if self.deprovisioned is not None:
            outcome = RunOutcome(
                message=f"node {self.identity.name} is being deprovisioned and takes no new work"
            )
            self._send(node_pb2.NodeMessage(exited=outcome.to_message(assignment.run_id)))
            return
        try:
            request = RunRequest.from_assignment(assignment, self.node_id)
        except Exception as exc:
            outcome = RunOutcome(message=f"the assignment could not be read: {exc}")
            self._send(node_pb2.NodeMessage(exited=outcome.to_message(assignment.run_id)))
            return
        known = KnownRun(request)
        self.runs[request.run_id] = known
        self._spawn(self._execute(known))

    async def _execute(self, known: KnownRun) -> None:
        run_id = known.request.run_id
        execution = driver_for(
            known.request,
            self.services,
            self._log_sink,
            node_id=self.node_id,
            fence=self._fences.for_run(run_id),
        )
        known.execution = execution
        try:
            outcome = await execution.start()
            if outcome is None:
                known.started = True
                if not known.forgotten:
                    self._send(
                        node_pb2.NodeMessage(
                            started=node_pb2.RunStarted(run_id=run_id, time=time.time())
                        )
                    )
                if execution.readiness_probe is not None:
                    self._spawn(self._report_ready(known, execution.readiness_probe))
                outcome = await execution.wait()
        except Exception as exc:  # never leave a run without a report
            log.exception("run %d failed inside the agent", run_id)
            outcome = RunOutcome(message=f"the node agent failed running the job: {exc!r}")
        finally:
            execution.destroy()
        persistent = self.services.volumes.persistent_directories(known.request.volume_locations)
        if persistent:  # walking them blocks; most runs mount none and skip the thread hop
            outcome.volume_sizes = await asyncio.to_thread(measured, persistent)
        known.outcome = outcome
        if not known.forgotten:
            self._send(node_pb2.NodeMessage(exited=outcome.to_message(run_id)))

    async def _report_ready(self, known: KnownRun, probe: Probe) -> None:
        """Tell Orchestrate once the service's readiness probe passes."""
        if await wait_until_ready(probe, lambda: known.outcome is None and not known.forgotten):
            known.ready = True
            run_id = known.request.run_id
            self._send(
                node_pb2.NodeMessage(ready=node_pb2.RunReady(run_id=run_id, time=time.time()))
            )

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _log_sink(self, run_id: int, stream: str, data: bytes) -> None:
        known = self.runs.get(run_id)
        if known is not None and not known.forgotten:
            known.output_seq += 1
            message = node_pb2.NodeMessage(
                log=node_pb2.LogData(run_id=run_id, stream=stream, data=data, seq=known.output_seq)
            )
            if self._output_acknowledged:
                known.unstored_output.append(message)
            self._send(message)


def _images_config(config: FuzzballConfig) -> dict[str, Any]:
    """The image backends' settings: ``images``, plus the CA the object cache's https
    certificate is checked against (``tls.ca-file``, as ``tls-ca-file``)."""
    settings = config.images.model_dump(mode="json", by_alias=True)
    if config.tls.ca_file is not None and not config.tls.plaintext:
        settings["tls-ca-file"] = str(config.tls.ca_file)
    return settings


def check_settings(config: FuzzballConfig) -> None:
    """Refuse settings the agent cannot run with (raises FailedPrecondition), among them a
    metadata guard (``substrate.metadata-guard``, on by default) this host cannot provide:
    no job would start, and none may start unguarded."""
    if not config.substrate.node_token:
        raise FailedPrecondition(
            "substrate.node-token: must be set (the value of orchestrate.node-token)"
        )
    if not config.substrate.orchestrate_address:
        raise FailedPrecondition("substrate.orchestrate-address: must be set")
    grpc_channel_credentials(config.tls)  # an unreadable tls.ca-file refuses to start
    # an unknown name refuses to start, naming it
    capabilities.configured(config.substrate.job_capabilities, JOB_CAPABILITIES)
    if config.substrate.metadata_guard:
        try:
            check_metadata_guard()
        except MetadataGuardError as exc:  # the message names substrate.metadata-guard
            raise FailedPrecondition(exc.message) from None
