"""The task-driver contract of Substrate: what one assignment is, how it ends, and the
interface every kind of work on a node implements.

Shaped after Nomad's ``drivers.DriverPlugin`` (StartTask, WaitTask, StopTask, SignalTask,
DestroyTask, InspectTask), kept small and asynchronous: :meth:`TaskDriver.start` prepares
and starts the work (or says why it could not), :meth:`TaskDriver.wait` returns how it ended,
:meth:`TaskDriver.stop` ends it early, :meth:`TaskDriver.destroy` frees what it held and
:meth:`TaskDriver.stats` reports it. The agent drives every kind of work through this
interface alone; which driver runs an assignment is decided in one place,
:func:`fuzzball_core.substrate.drivers.driver_for`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.drivers import VolumeLocation
from fuzzball_core.errors import FuzzballError
from fuzzball_core.spec.models import Job, Probe, Service
from fuzzball_core.substrate.devices import DevicePool
from fuzzball_core.substrate.images import NodeImages
from fuzzball_core.substrate.mount_holds import ImageMountHolds
from fuzzball_core.substrate.network import NodeNetwork
from fuzzball_core.substrate.run_secrets import FetchRunSecrets, RunSecrets, WorkflowTokens
from fuzzball_core.substrate.volumes import WorkflowVolumes
from fuzzball_runtime.capabilities import DEFAULT as DEFAULT_CAPABILITIES

log = logging.getLogger(__name__)

#: Payload kinds of image stages' runs (the ``kind`` of their ``job_json``), as Orchestrate's
#: image stages send them.
PULL = "image-pull"
BUILD = "image-build"
#: The payload kind of a volume egress stage's run (Orchestrate's ``egress_stage.EGRESS``).
EGRESS = "volume-egress"

#: Where a run's output goes: ``sink(run_id, stream, data)`` (stdout, stderr or progress).
LogSink = Callable[[int, str, bytes], None]


class StopReason(StrEnum):
    """Why a run is being ended before its work finished by itself."""

    CANCELED = "canceled"
    TIMED_OUT = "timed_out"
    #: a rank of a multinode part failed; the stop's message says how
    FAILED = "failed"


@dataclass(frozen=True)
class RunRequest:
    """What Orchestrate asked this node to run (an ``Assignment``, parsed)."""

    run_id: int
    workflow_id: str
    stage_name: str
    task_id: int | None
    #: None for an image stage's or a volume egress's run, whose definition is its payload
    job: Job | Service | None
    definition: dict[str, Any]
    timeout_seconds: float | None
    #: the nodes of the run, in rank order (several for a multinode job)
    node_ids: list[str] = field(default_factory=list)
    #: what to fetch into the mounted volumes first: {volume: [{source, destination}]}
    volume_ingress: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    #: the workflow's services placed when the run was assigned: name -> their node's address
    hosts: dict[str, str] = field(default_factory=dict)
    #: the logical CPUs this node's part is pinned to ("0-3"), or None when it is not pinned
    cpuset: str | None = None
    #: where each volume the job mounts lives (absent: a per-workflow directory on this node)
    volume_locations: dict[str, VolumeLocation] = field(default_factory=dict)
    #: the workflow's token, when Orchestrate sent it with the assignment because the job
    #: needs nothing else from ``RunSecrets`` ("": asked for as the run starts)
    workflow_token: str = field(default="", repr=False)
    #: who owns the workflow ("ACCOUNT_ID/USER_ID"; "": an older Orchestrate's assignment)
    owner: str = ""

    @classmethod
    def from_assignment(cls, assignment: node_pb2.Assignment, node_id: str = "") -> RunRequest:
        """Parse an assignment as node ``node_id`` (whose cpuset it takes); raises
        InvalidArgument when its job definition is unusable."""
        definition = json.loads(assignment.job_json)
        image_work = definition.get("kind") in (PULL, BUILD, EGRESS)
        return cls(
            run_id=assignment.run_id,
            workflow_id=assignment.workflow_id,
            stage_name=assignment.stage_name,
            task_id=assignment.task_id if assignment.has_task else None,
            job=None
            if image_work
            else _step(_step_model(assignment.stage_name), assignment.job_json, definition),
            definition=definition,
            timeout_seconds=assignment.timeout_seconds or None,
            node_ids=list(assignment.node_ids),
            volume_ingress=_json_object(assignment.volume_ingress_json),
            hosts=dict(assignment.hosts),
            cpuset=assignment.cpus.get(node_id) or None,
            volume_locations={
                name: VolumeLocation.from_json(location)
                for name, location in _json_object(assignment.volumes_json).items()
            },
            workflow_token=assignment.workflow_token,
            owner=assignment.owner,
        )

    @property
    def cgroup_key(self) -> str:
        """Which jobs may reuse the cgroups this run's job leaves (``ContainerSpec.keep_cgroups``):
        its owner's (metering's counters then mix only that owner's traffic), or, when the
        assignment names no owner (an older Orchestrate), its workflow's. The prefixes keep
        a workflow id from ever equalling an owner."""
        if self.owner:
            return f"owner:{self.owner}"
        return f"workflow:{self.workflow_id}"

    @property
    def job_name(self) -> str:
        """``hello`` for the stage ``jobs.hello``."""
        return self.stage_name.partition(".")[2] or self.stage_name

    @property
    def image_work(self) -> str | None:
        """The payload kind of a run without a container job (:data:`PULL`, :data:`BUILD`,
        :data:`EGRESS`), else None."""
        return None if self.job is not None else str(self.definition.get("kind"))


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
    #: bytes used by each persistent volume the run mounted, measured as it ended
    volume_sizes: dict[str, int] = field(default_factory=dict)

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
            volume_sizes=self.volume_sizes,
        )


@dataclass
class NodeServices:
    """What every run on this node shares."""

    images: NodeImages
    volumes: WorkflowVolumes
    devices: DevicePool
    hooks: Any
    state_dir: Path
    runs_dir: Path
    start_pool: Executor
    pull_pool: Executor
    metering: bool = True
    #: a job's emptied cgroups are kept for the owner's next job on the node where the
    #: runtime finds it safe (``ContainerSpec.keep_cgroups``), instead of made and removed
    #: for each (the agent's start and release threads' ``mkdir``, ``rmdir`` and metering's
    #: attach)
    keep_cgroups: bool = True
    #: keeps recently used image mounts between jobs (None: every job mounts its own)
    mount_holds: ImageMountHolds | None = None
    #: the node's address and its isolated jobs' subnet
    network: NodeNetwork = field(default_factory=NodeNetwork)
    #: the capabilities its jobs' processes may hold (``substrate.job-capabilities``;
    #: ``ContainerSpec.capabilities``, None: every one)
    capabilities: frozenset[str] | None = DEFAULT_CAPABILITIES
    #: asks Orchestrate for a run's secrets as it starts (None: nothing to ask, no secrets)
    run_secrets: FetchRunSecrets | None = None
    #: the workflows' tokens, asked for once per workflow by runs that need no secret
    workflow_tokens: WorkflowTokens = field(default_factory=WorkflowTokens)


class TaskDriver(ABC):
    """One run on this node, from its start to the release of what it held."""

    #: a service's readiness probe: the agent reports ``RunReady`` once it passes
    readiness_probe: Probe | None = None

    def __init__(self, request: RunRequest, node: NodeServices, sink: LogSink) -> None:
        self.request = request
        self.node = node
        self.sink = sink
        self.loop = asyncio.get_running_loop()
        #: why the run is being ended early, once :meth:`stop` was called
        self.stopping: StopReason | None = None
        self.stop_message = ""
        #: when the run's work started (its container, for the drivers that have one)
        self.started_at: float | None = None

    @abstractmethod
    async def start(self) -> RunOutcome | None:
        """Prepare and start the work; the outcome instead when it could not start."""

    async def secrets(self, needed: bool) -> RunSecrets | RunOutcome:
        """The run's secrets and its workflow's token, asked for now; the outcome of a run
        that ``needed`` them (a ``secret://`` env value, an ``image.secret``) and could not
        get them, naming why (never a value). A run that needs none starts without its token
        when Orchestrate cannot be asked."""
        if not needed and self.request.workflow_token and self.request.job is not None:
            # Orchestrate sent the token with the assignment: nothing to ask
            return RunSecrets(workflow_token=self.request.workflow_token)
        fetch = self.node.run_secrets
        if fetch is None:
            if needed:
                return RunOutcome(message="this node cannot ask Orchestrate for secrets")
            return RunSecrets()
        run_id = self.request.run_id
        if not needed and self.request.job is None:
            # an image, build or egress stage's run gets only the secrets it declares and no
            # token: declaring none, it has nothing to ask for (a call per hello-world saved)
            return RunSecrets()
        try:
            if needed:
                return await fetch(run_id)
            # a job's or service's run needing no secret gets nothing but its workflow's
            # token: one call per workflow suffices (an image or egress stage gets no token)
            return await self.node.workflow_tokens.get(
                self.request.workflow_id, lambda: fetch(run_id)
            )
        except FuzzballError as exc:
            if needed:
                return RunOutcome(message=f"the run's secrets could not be read: {exc.message}")
            log.warning("run %d: no workflow token (%s)", self.request.run_id, exc.message)
            return RunSecrets()

    @abstractmethod
    async def wait(self) -> RunOutcome:
        """Wait for the work to end (its output delivered) and say how it ended."""

    def stop(self, reason: StopReason | str, message: str = "") -> None:
        """End the run early as ``reason`` (once: later calls change nothing)."""
        if self.stopping is not None:
            return
        self.stopping = StopReason(reason)
        self.stop_message = message
        self._on_stop()

    @abstractmethod
    def _on_stop(self) -> None:
        """Act on :meth:`stop` at once (work without processes checks :attr:`stopping`)."""

    @abstractmethod
    def signal(self, sig: int) -> None:
        """Send ``sig`` to the run's processes, if it has any running."""

    @abstractmethod
    def destroy(self) -> None:
        """Free what the run held on the node."""

    def stats(self) -> dict[str, Any]:
        """What the run reports about itself: its id and start time, and more per driver."""
        return {"run_id": self.request.run_id, "started_at": self.started_at}

    def outcome_without_start(self) -> RunOutcome:
        """The outcome of a run stopped before its work could start."""
        return RunOutcome(
            canceled=self.stopping == StopReason.CANCELED,
            timed_out=self.stopping == StopReason.TIMED_OUT,
            message=self.stop_message,
        )


class PoolTaskDriver(TaskDriver):
    """A run whose work is one call on the node's transfer pool (an image pull, a volume's
    egress): no processes to signal, and a stop the call notices between its own steps
    (checking :attr:`stopping`), since a transfer in a thread cannot be interrupted."""

    def __init__(self, request: RunRequest, node: NodeServices, sink: LogSink) -> None:
        super().__init__(request, node, sink)
        self._work: asyncio.Future[RunOutcome] | None = None

    def begin(self, work: Callable[..., RunOutcome], *args: Any) -> None:
        """Start ``work(*args)`` on the node's transfer pool; :meth:`wait` has its outcome."""
        self._work = self.loop.run_in_executor(self.node.pull_pool, work, *args)

    async def wait(self) -> RunOutcome:
        """The work's outcome, or a stopped run's."""
        assert self._work is not None, "wait() before start()"
        outcome = await self._work
        return self.outcome_without_start() if self.stopping is not None else outcome

    def _on_stop(self) -> None:
        pass  # the work checks `stopping` between its steps; wait() reports the stop

    def signal(self, sig: int) -> None:
        """The work runs no processes: nothing to signal."""


def _step_model(stage_name: str) -> type[Job] | type[Service]:
    """The model of a stage's definition: services carry fields jobs do not."""
    return Service if stage_name.startswith("services.") else Job


#: Validated step models by their stage's ``job_json``, most recent last: every task of an
#: array (and every run of a stage) carries the same payload, and validating it was a
#: tenth of the agent's per-job Python. The models are shared, so they are only read.
_STEPS: OrderedDict[tuple[type[Job] | type[Service], str], Job | Service] = OrderedDict()
#: payloads remembered at most (a node runs a few stages at a time, not hundreds)
STEP_CACHE_SIZE = 64


def _step(
    model: type[Job] | type[Service], job_json: str, definition: dict[str, Any]
) -> Job | Service:
    """``definition`` (the parsed ``job_json``) validated as ``model``, reusing the model of
    an identical payload seen recently; raises as ``model_validate`` does."""
    key = (model, job_json)
    step = _STEPS.get(key)
    if step is not None:
        _STEPS.move_to_end(key)
        return step
    step = _STEPS[key] = model.model_validate(definition)
    if len(_STEPS) > STEP_CACHE_SIZE:
        _STEPS.popitem(last=False)
    return step


def _json_object(text: str) -> dict[str, Any]:
    """An optional JSON object field of an assignment ({} when empty, as most are)."""
    if not text or text == "{}":
        return {}
    parsed: dict[str, Any] = json.loads(text)
    return parsed


def error_text(exc: BaseException) -> str:
    """An exception as a run's failure message: a Fuzzball error's own message, else its
    type and text."""
    return exc.message if isinstance(exc, FuzzballError) else f"{type(exc).__name__}: {exc}"
