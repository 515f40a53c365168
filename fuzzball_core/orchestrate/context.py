"""What the engine's parts share: settings, the database, the scheduler, and the state kept
in memory between passes.

Each part of the engine (submission, placement, node reports, retries, multinode runs,
services, nodes) is a module of functions that take this :class:`EngineContext` and the
:class:`~fuzzball_core.orchestrate.transaction.Transaction` they work in; none of them
holds state of its own or calls back into the :class:`~fuzzball_core.orchestrate.engine.Engine`.
Everything here except :attr:`EngineContext.ready_stages` and
:attr:`EngineContext.blocked_reported` is rebuilt from the database by
:func:`fuzzball_core.orchestrate.placement.rebuild`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from sqlalchemy.orm import Session, sessionmaker

from fuzzball_core.orchestrate import events
from fuzzball_core.orchestrate.events import EventHook
from fuzzball_core.orchestrate.fences import FenceRelay
from fuzzball_core.orchestrate.node_hub import NodeHub
from fuzzball_core.orchestrate.plans import Plans
from fuzzball_core.orchestrate.transaction import Transaction
from fuzzball_core.scheduling import Diagnosis, JobRequest, Scheduler
from fuzzball_core.spec.models import Retry


@dataclass
class PendingRun:
    """A run waiting for placement."""

    run_id: int
    workflow_id: str
    stage_id: int
    request: JobRequest


@dataclass
class Remembered:
    """What the engine knows only from what it was told, not from the database: kept
    through a failed pass as it was before the pass began (see :meth:`EngineContext.remember`)."""

    #: service stages whose readiness probe passed (nodes report it again after a restart)
    ready_stages: set[int] = field(default_factory=set)
    #: scheduling_blocked causes already reported, by stage id
    blocked_reported: dict[int, set[str]] = field(default_factory=dict)

    def copy(self) -> Remembered:
        """A copy that later changes to this one do not touch."""
        return Remembered(
            set(self.ready_stages), {k: set(v) for k, v in self.blocked_reported.items()}
        )


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
        self.fences = FenceRelay()
        #: runs waiting for placement, by scheduler key
        self.pending: dict[str, PendingRun] = {}
        #: stages that have runs (started, from the dependency graph's point of view)
        self.dispatched: set[int] = set()
        #: workflows to advance in this pass
        self.dirty: set[str] = set()
        self.node_names: dict[str, str] = {}
        self.device_plugin_failed: dict[str, bool] = {}
        #: why each waiting run was not placed in the last pass, by run key
        self.diagnoses: Mapping[str, Diagnosis] = {}
        self.remembered = Remembered()

    @property
    def ready_stages(self) -> set[int]:
        """Service stages whose readiness probe passed."""
        return self.remembered.ready_stages

    @property
    def blocked_reported(self) -> dict[int, set[str]]:
        """``scheduling_blocked`` causes already reported, by stage id."""
        return self.remembered.blocked_reported

    def remember(self) -> Remembered:
        """A copy of what is not in the database, to put back if the coming pass fails."""
        return self.remembered.copy()

    def transaction(self) -> Transaction:
        """A new unit of work at the clock's time."""
        return Transaction(self.sessions(), self.clock())

    def publish(self, tx: Transaction) -> None:
        """Once ``tx`` committed: send its messages for nodes and announce its events (a node
        never sees work the database does not hold)."""
        for node_id, message in tx.outbox:
            self.hub.deliver(node_id, message)
        events.announce(tx.events, self.event_hook)

    def node_names_of(self, node_ids: Iterable[str]) -> str:
        """``a, b``: the nodes' names (their ids when unknown), for event messages."""
        return ", ".join(self.node_names.get(n, n) for n in node_ids)
