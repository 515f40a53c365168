"""What the engine's parts share: settings, the database, the scheduler, and the state kept
in memory between passes.

Each part of the engine (submission, placement, node reports, retries, multinode runs,
services, nodes) is a module of functions that take this :class:`EngineContext` and the
:class:`~fuzzball_core.orchestrate.transaction.Transaction` they work in; none of them
holds state of its own or calls back into the :class:`~fuzzball_core.orchestrate.engine.Engine`.
Everything here except :attr:`EngineContext.told` is rebuilt from the database by
:func:`fuzzball_core.orchestrate.recovery.rebuild`.
"""

from __future__ import annotations

import math
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session, sessionmaker

from fuzzball_core.config import LogsConfig
from fuzzball_core.orchestrate import events
from fuzzball_core.orchestrate.endpoint_urls import EndpointUrls
from fuzzball_core.orchestrate.events import EventHook
from fuzzball_core.orchestrate.fences import FenceRelay
from fuzzball_core.orchestrate.image_stages import ImagesOnNodes
from fuzzball_core.orchestrate.live_rows import LiveRows
from fuzzball_core.orchestrate.node_hub import NodeHub
from fuzzball_core.orchestrate.pending_queue import PendingQueue
from fuzzball_core.orchestrate.plans import Plans
from fuzzball_core.orchestrate.transaction import RunFields, Transaction
from fuzzball_core.orchestrate.warning_limiter import WarningLimiter
from fuzzball_core.scheduling import Diagnosis, JobRequest, Scheduler
from fuzzball_core.spec.models import Retry
from fuzzball_core.store.models import Stage, Workflow

if TYPE_CHECKING:  # provisioning imports nothing of the engine; this is for the type only
    from fuzzball_core.orchestrate.provisioning import Provisioning

#: seconds within which a node's dropped reports of one kind are logged once
DROPPED_REPORT_WARNINGS_WINDOW = 60.0
#: the (node, kind) pairs whose dropped reports' warnings are remembered (a bound on memory)
DROPPED_REPORT_WARNINGS_KEPT = 4096


@dataclass
class PendingRun:
    """A run waiting for placement."""

    run_id: int
    workflow_id: str
    stage_id: int
    #: its stage's name, for the events about its waiting (the stage row is not read)
    stage_name: str
    request: JobRequest
    #: its task of an array (None: the stage's single run), for its placement's event and
    #: assignment (the run's row is not read: :func:`~fuzzball_core.orchestrate.placement.
    #: schedule`)
    task_id: int | None = None


@dataclass
class LiveRun:
    """A run placed on its nodes and not ended yet (ASSIGNED or STARTED), as the engine
    knows it between passes: enough to answer about it, and to apply its ``started`` report
    or a task's plain exit (:mod:`~fuzzball_core.orchestrate.node_reports`), without reading
    its row."""

    workflow_id: str
    stage_name: str
    stage_id: int
    #: its task of an array (None: the stage's single run)
    task_id: int | None
    #: the nodes it was placed on
    node_ids: tuple[str, ...]
    #: its node reported it running (STARTED)
    started: bool = False


#: Called in the pass for each run whose assignment goes to its nodes (placed, or sent again
#: to a node that reconnected), with its workflow and stage rows: what the run will ask for
#: as it starts can be prepared in the same transaction (``run_secrets``' workflow token).
#: Answers the workflow token the assignment carries ("" for none: the run asks
#: ``RunSecrets`` as it starts).
AssignmentHook = Callable[[Transaction, Workflow, Stage, RunFields], str]


@dataclass
class Told:
    """What the engine knows only from what happened, not from the database rows.

    A failed unit of work must leave it as it was, or the event recording it (rolled back
    with the rest) would never be recorded again: each change is journaled until the work
    commits (:meth:`settle`) or fails (:meth:`undo`).
    """

    #: service stages whose readiness probe passed (nodes report it again after a restart)
    ready_stages: set[int] = field(default_factory=set)
    #: scheduling_blocked causes already reported, by stage id
    blocked_reported: dict[int, set[str]] = field(default_factory=dict)
    _journal: list[Callable[[], None]] = field(default_factory=list)

    def mark_ready(self, stage_id: int) -> bool:
        """Note that the service stage is ready; False if it was already."""
        if stage_id in self.ready_stages:
            return False
        self.ready_stages.add(stage_id)
        self._journal.append(lambda: self.ready_stages.discard(stage_id))
        return True

    def mark_blocked(self, stage_id: int, reason: str) -> bool:
        """Note that the stage's ``reason`` for waiting was reported; False if it was already."""
        reported = self.blocked_reported.setdefault(stage_id, set())
        if reason in reported:
            return False
        reported.add(reason)
        self._journal.append(lambda: reported.discard(reason))
        return True

    def settle(self) -> None:
        """The work committed: keep what it noted."""
        self._journal.clear()

    def undo(self) -> None:
        """The work failed: forget what it noted."""
        while self._journal:
            self._journal.pop()()


@dataclass
class Returning:
    """The nodes expected back after a restart (READY when the engine rebuilt its view) or a
    disruption (:func:`~fuzzball_core.orchestrate.nodes.stream_closed`), not reconnected
    (Hello) since. While they keep coming back, those still waiting their turn
    on the loop keep their leases (:func:`~fuzzball_core.orchestrate.nodes.expire_leases`)."""

    nodes: set[str] = field(default_factory=set)
    #: when the wave is over unless more of them come back: the restart's grace at first,
    #: then a lease after the latest of them registered or said Hello, if that is later
    until: float = 0.0


class EngineContext:
    """The engine's settings, collaborators and in-memory state, passed to every part."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        scheduler: Scheduler,
        hub: NodeHub,
        *,
        lease_seconds: float = 15.0,
        max_eviction_restarts: int = 3,
        default_retry: Retry | None = None,
        event_hook: EventHook | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.sessions = sessions
        self.scheduler = scheduler
        self.hub = hub
        self.lease_seconds = lease_seconds
        self.max_eviction_restarts = max_eviction_restarts
        self.default_retry = default_retry
        self.event_hook = event_hook
        self.clock = clock
        self.plans = Plans(sessions)
        #: live workflows' rows kept between transactions (read once, not in every pass)
        self.live_rows = LiveRows()
        self.fences = FenceRelay()
        #: runs waiting for placement, by scheduler key (remembering what changed in them
        #: since the last pass, for the scheduler's own copy: Scheduler.schedule_changes)
        self.pending: PendingQueue[PendingRun] = PendingQueue()
        #: stages that have runs (started, from the dependency graph's point of view)
        self.dispatched: set[int] = set()
        #: workflows to advance in this pass
        self.dirty: set[str] = set()
        self.node_names: dict[str, str] = {}
        #: node id -> when its lease ends, for every READY node. A heartbeat renews it here
        #: without the database (:func:`~fuzzball_core.orchestrate.nodes.heartbeat`); the
        #: rows' ``lease_expires_at`` and ``last_seen`` follow at most once a lease, in one
        #: statement per pass (:func:`~fuzzball_core.orchestrate.nodes.persist_leases`)
        self.leases: dict[str, float] = {}
        #: no lease in :attr:`leases` ends before this (a lower bound: heartbeats only push
        #: leases later; a lease tracked below it lowers it): passes before it skip the
        #: expiry scan (:func:`~fuzzball_core.orchestrate.nodes.expire_leases`)
        self.first_lapse = 0.0
        #: node id -> the ``lease_expires_at`` its row holds
        self.stored_leases: dict[str, float] = {}
        #: when the pass last looked for rows a lease behind (``persist_leases``)
        self.leases_persisted_at = 0.0
        #: node id -> when a READY node whose Connect stream closed (none replaced it) is
        #: lost unless it says Hello again first, where that is before its lease ends
        #: (:func:`~fuzzball_core.orchestrate.nodes.stream_closed`)
        self.stream_graces: dict[str, float] = {}
        #: no stream grace ends before this: a node whose stream had closed came back a grace
        #: before it, and others of its wave may still be queued behind it
        #: (:func:`~fuzzball_core.orchestrate.nodes._back_within_grace`)
        self.graces_held = -math.inf
        #: (when, node id) of READY nodes' streams closed within the last grace (oldest
        #: first), to tell a disruption from failed agents
        #: (:func:`~fuzzball_core.orchestrate.nodes.stream_closed`)
        self.recent_closes: deque[tuple[float, str]] = deque()
        #: a closed stream before this is part of a disruption: it gets no grace
        self.disrupted_until = -math.inf
        #: node id -> the lease named in its latest Welcome (lengthened on large clusters:
        #: :func:`~fuzzball_core.orchestrate.nodes.lease_terms`); absent: ``lease_seconds``
        self.node_leases: dict[str, float] = {}
        #: the heartbeat interval the connected nodes were last told in one sweep
        #: (:func:`~fuzzball_core.orchestrate.nodes.retune`; 0: none yet)
        self.tuned_heartbeat = 0.0
        #: the reconnect wave after a restart (set by the rebuild at start-up)
        self.returning = Returning()
        self.device_plugin_failed: dict[str, bool] = {}
        #: where each node is reached (as it registered it): the workflows' services resolve
        #: to their node's address (:mod:`fuzzball_core.orchestrate.name_resolution`)
        self.node_addresses: dict[str, str] = {}
        #: why each waiting run was not placed in the last pass, by run key
        self.diagnoses: Mapping[str, Diagnosis] = {}
        #: why a live multinode run was placed other than it asked (spread over NVLink
        #: domains), by run id: ``workflow why`` adds it (the placement's event keeps it)
        self.placement_notes: dict[int, str] = {}
        #: every live run (ASSIGNED or STARTED) by id: a report or a question about a run
        #: is answered from here where that suffices (set by placement, marked by the
        #: ``started`` report, dropped by :func:`~fuzzball_core.orchestrate.runs.finish_run`)
        self.live_runs: dict[int, LiveRun] = {}
        #: the nodes holding a directory of each live workflow (its per-workflow volumes):
        #: told when it ends (:mod:`~fuzzball_core.orchestrate.workflow_ends`)
        self.workflow_nodes: dict[str, set[str]] = {}
        #: node reports dropped because the run or volume they name is not the reporting
        #: node's, by report kind (:func:`~fuzzball_core.orchestrate.node_reports.apply`;
        #: Orchestrate's metrics)
        self.dropped_reports: Counter[str] = Counter()
        #: which dropped reports are logged: a node's first of a kind, then at most one a
        #: minute with the count held back since (a node repeating them cannot fill the log)
        self.dropped_report_warnings: WarningLimiter[tuple[str, str]] = WarningLimiter(
            window=DROPPED_REPORT_WARNINGS_WINDOW, capacity=DROPPED_REPORT_WARNINGS_KEPT
        )
        #: which live nodes hold which pulled images (a pull stage of one finishes at once)
        self.images_on_nodes = ImagesOnNodes()
        #: what prepares, in the pass, for each run assigned (None: nothing)
        self.assignment_hook: AssignmentHook | None = None
        self.told = Told()
        #: how much of the jobs' output is stored (``orchestrate.logs``)
        self.log_limits = LogsConfig()
        #: where users reach the endpoints (``orchestrate.endpoints``), for the
        #: ``FB_SERVICE_*_ENDPOINT_*`` variables of the runs
        self.endpoint_urls = EndpointUrls()
        #: the provisioning loop's decisions (the file's ``provisioner.definitions`` and the
        #: central configuration's; Orchestrate always builds it, idle without definitions;
        #: None in engines built without it, as tests do). Submission asks it before refusing
        #: a job no node could hold, and ``workflow why`` for the node a waiting run was
        #: requested.
        self.provisioning: Provisioning | None = None

    def transaction(self) -> Transaction:
        """A new unit of work at the clock's time."""
        return Transaction(self.sessions(), self.clock(), kept=self.live_rows)

    def publish(self, tx: Transaction) -> None:
        """Once ``tx`` committed: do what it left for then (:meth:`Transaction.after_commit`),
        send its messages for nodes and announce its events (a node never sees work the
        database does not hold)."""
        for action in tx.committed:
            action()
        for node_id, message in tx.outbox:
            self.hub.deliver(node_id, message)
        events.announce(tx.events, self.event_hook)

    def node_names_of(self, node_ids: Iterable[str]) -> str:
        """``a, b``: the nodes' names (their ids when unknown), for event messages."""
        return ", ".join(self.node_names.get(n, n) for n in node_ids)
