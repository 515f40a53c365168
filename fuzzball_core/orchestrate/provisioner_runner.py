"""The provisioning loop running inside Orchestrate: the glue between the engine and
:class:`~fuzzball_core.orchestrate.provisioning.Provisioning`.

Every ``interval`` seconds, on the engine's event loop, it reads what the engine knows (the
waiting runs no registered node could hold, which provisioned nodes are empty and since
when, which a deprovision hold emptied) and hands that to the loop in a worker thread, so a
driver's slow cloud call never holds up a pass. What the loop reports becomes node events;
a deprovision it decides is a ``deprovision`` hold placed as ``provisioner``, so the node
is torn down only once empty, and its instance deleted once after that.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from sqlalchemy import select

from fuzzball_core.config import ConfigError, FuzzballConfig
from fuzzball_core.drivers import Provisioner
from fuzzball_core.errors import FuzzballError
from fuzzball_core.orchestrate import events, nodes, volumes
from fuzzball_core.orchestrate.engine import Engine
from fuzzball_core.orchestrate.provisioning import Provisioning
from fuzzball_core.orchestrate.provisioning_store import SqlInstanceStore
from fuzzball_core.orchestrate.transaction import Transaction
from fuzzball_core.plugins import PluginRegistry
from fuzzball_core.scheduling import JobRequest
from fuzzball_core.store.models import Node
from fuzzball_core.vocabulary import EventKind, InstanceState, NodeStatus

log = logging.getLogger("fuzzball.provisioning")

#: seconds between two rounds of the loop
INTERVAL = 2.0


def build_provisioning(
    config: FuzzballConfig, engine: Engine, registry: PluginRegistry | None
) -> Provisioning:
    """The loop over the configured definitions, their drivers loaded from
    ``fuzzball.provisioners``. It exists with no definitions too, idle until the central
    configuration gives it some (``/admin/centralconfig``)."""
    settings = config.provisioner
    if settings.definitions and registry is None:
        raise FuzzballError("provisioner.definitions need the plugin registry to load drivers")
    drivers: dict[str, Provisioner] = {}
    for name in sorted({d.driver for d in settings.definitions}):
        assert registry is not None  # refused above
        drivers[name] = registry.driver("fuzzball.provisioners", name)
    ca_pem = ""
    if config.tls.ca_file is not None:
        try:
            ca_pem = config.tls.ca_file.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or exc
            raise ConfigError(f"tls.ca-file: cannot read {config.tls.ca_file}: {reason}") from None
    return Provisioning(
        settings,
        drivers,
        node_address=settings.node_address or config.orchestrate.grpc_listen,
        ca_pem=ca_pem,
        plaintext=config.tls.plaintext,
        store=SqlInstanceStore(engine.sessions),
    )


class ProvisionerRunner:
    """Runs the loop beside the engine until stopped."""

    def __init__(self, engine: Engine, provisioning: Provisioning) -> None:
        self.engine = engine
        self.provisioning = provisioning
        #: provisioned node name -> when it was first seen empty
        self.empty_since: dict[str, float] = {}
        self._pending_events: list[tuple[EventKind, str, str]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        provisioning.on_event = self._queue_event
        provisioning.place_hold = self._place_hold
        engine.context.provisioning = provisioning

    def _queue_event(self, kind: EventKind, message: str, name: str) -> None:
        # called from the worker thread too: events are written on the loop, by round()
        self._pending_events.append((kind, message, name))
        if kind is EventKind.INSTANCE_DELETED or kind is EventKind.INSTANCE_CREATE_FAILED:
            log.info("%s", message)

    def _place_hold(self, name: str, reason: str) -> None:
        def place() -> None:
            try:
                self.engine.add_hold(name, "deprovision", "provisioner", reason, "provisioner")
            except FuzzballError as exc:
                log.warning("deprovision hold on %s refused: %s", name, exc.message)

        if self._loop is not None:
            self._loop.call_soon_threadsafe(place)
        else:
            place()

    async def run(self, stop: asyncio.Event) -> None:
        """Rounds every :data:`INTERVAL` seconds until ``stop`` is set."""
        self._loop = asyncio.get_running_loop()
        while not stop.is_set():
            try:
                await self.round()
            except Exception:  # one bad round must not end provisioning
                log.exception("provisioning round failed")
            with contextlib.suppress(TimeoutError):  # the interval passed: the next round
                await asyncio.wait_for(stop.wait(), INTERVAL)

    async def round(self) -> None:
        """One round: scale up for waiting work, sweep idle and overdue instances, delete
        the instances whose nodes a deprovision hold emptied, write the events."""
        if not self.provisioning.definitions and not self.provisioning.instances:
            return  # idle: nothing to scale, nothing to sweep (until central definitions)
        waiting = self.waiting()
        idle, holding, torn_down = self.node_states()
        if waiting:
            await asyncio.to_thread(self.provisioning.scale_up, waiting)
        await asyncio.to_thread(self.provisioning.sweep, idle, holding)
        await asyncio.to_thread(self.provisioning.reconcile)
        for name in torn_down:
            await asyncio.to_thread(self.provisioning.torn_down, name)
        self.flush_events()

    def waiting(self) -> list[JobRequest]:
        """The waiting runs no current node could take in the last pass (the scheduler's
        diagnosis says why): busy, too small, held or absent nodes alike. ``max-nodes``
        bounds what they get; idle nodes go after ``idle-timeout``."""
        unplaced = self.engine.context.diagnoses
        return [
            pending.request
            for pending in list(self.engine.context.pending.values())
            if pending.request.id in unplaced
        ]

    def node_states(self) -> tuple[dict[str, float | None], set[str], list[str]]:
        """Each live provisioned node's empty-since time (None: busy, running work or holding
        node-local persistent volumes), the nodes holding such volumes (kept past their ttl
        too), and the provisioned nodes a deprovision hold has emptied whose instances are
        not yet deleted."""
        live = {
            r.name
            for r in self.provisioning.records([InstanceState.CREATED, InstanceState.CREATING])
        }
        now = time.time()
        idle: dict[str, float | None] = {}
        holding: set[str] = set()
        torn_down = []
        with self.engine.sessions() as session:
            for node in session.scalars(select(Node).where(Node.name.in_(live))):
                if node.status == NodeStatus.DEPROVISIONED:
                    torn_down.append(node.name)
                    continue
                if volumes.held_on(session, node.id):
                    # the only copy of a node-local volume lives there: never idle
                    holding.add(node.name)
                if node.name in holding or nodes.live_runs_on(session, node.id):
                    self.empty_since.pop(node.name, None)
                    idle[node.name] = None
                else:
                    idle[node.name] = self.empty_since.setdefault(node.name, now)
        return idle, holding, torn_down

    def flush_events(self) -> None:
        """Write the loop's reports as node events (the node's own once it registered)."""
        pending, self._pending_events = self._pending_events, []
        if not pending:
            return

        def write(tx: Transaction) -> None:
            for kind, message, name in pending:
                node = tx.session.scalars(select(Node).where(Node.name == name)).first()
                events.record(tx, kind, message, node_id=node.id if node else None)

        self.engine.change(write)
