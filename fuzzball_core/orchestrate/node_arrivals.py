"""Registers and Hellos applied together, one transaction per turn of the event loop.

A restarted Orchestrate has every node of the cluster come back at once: each sends a
Register and then, on its new Connect stream, a Hello. Applied one by one, each was a
transaction of its own (the pool's checkout, BEGIN, about five statements, COMMIT: some ten
PostgreSQL round trips the one event loop waits on), 500 nodes took longer than a lease to
work through on a loaded machine, and their running jobs waited on that. Here the arrivals
that reach the loop while it is busy wait for its next turn and are applied there in one
transaction, their nodes, holds and runs read in one query each (:func:`nodes.preload`).
A single arrival on a quiet cluster is a batch of one: the same transaction as before.

If the batch's transaction fails (one node refused, a fault), nothing of it happened, and
each arrival is applied again alone, as before, so one node's refusal is its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from fuzzball_core.orchestrate import node_versions, nodes
from fuzzball_core.orchestrate.context import EngineContext
from fuzzball_core.orchestrate.transaction import Transaction
from fuzzball_core.orchestrate.turn_batches import Change, TurnBatches
from fuzzball_core.scheduling import CpuCore, Resources

#: The most arrivals one transaction applies; the rest wait for the loop's next turn. A
#: batch holds the loop while it runs (a few ms of CPU per node), and the REST gateway, the
#: engine's passes and the streams' reads get their turns between batches.
MAX_BATCH = 64
#: Seconds an arrival during a wave waits for others to join its batch
#: (:class:`~fuzzball_core.orchestrate.turn_batches.TurnBatches`): gRPC's server takes one
#: call a turn of the loop, and without the wait a flap's 5,000 returning nodes were applied
#: one transaction each.
GATHER = 0.02


@dataclass(frozen=True)
class Registration:
    """A node's Register, as the engine records it."""

    name: str
    capacity: Resources
    annotations: dict[str, str]
    device_plugin_failed: bool = False
    address: str = ""
    cpu_topology: Sequence[CpuCore] = ()
    #: the Substrate version the node reports (None: not checked)
    version: str | None = None
    health_disabled: bool = False


def register(
    ctx: EngineContext,
    tx: Transaction,
    registration: Registration,
    preloaded: nodes.Preloaded | None = None,
) -> str:
    """Record the node (new, or returning under the same name) and hold or release it for
    its Substrate version (:mod:`~fuzzball_core.orchestrate.node_versions`); return its id."""
    # both read the node's holds: once for the two, when the batch read them
    node_holds = preloaded.holds_of(registration.name) if preloaded is not None else None
    node_id = nodes.register(
        ctx,
        tx,
        registration.name,
        registration.capacity,
        registration.annotations,
        device_plugin_failed=registration.device_plugin_failed,
        address=registration.address,
        cpu_topology=registration.cpu_topology,
        preloaded=preloaded,
        node_holds=node_holds,
    )
    if registration.version is not None:
        node_versions.check(
            ctx,
            tx,
            node_id,
            registration.version,
            health_disabled=registration.health_disabled,
            node_holds=node_holds,
        )
    return node_id


@dataclass(frozen=True)
class Hello:
    """A node's Hello on a new Connect stream: the runs it knows, and the workflows whose
    directories it keeps."""

    node_id: str
    known: frozenset[int]
    kept_workflows: frozenset[str] = frozenset()


Arrival = Registration | Hello


def apply(ctx: EngineContext, tx: Transaction, arrival: Arrival, preloaded: Any = None) -> Any:
    """Apply one arrival in ``tx``: a Registration's node id, a Hello's runs to drop."""
    if isinstance(arrival, Registration):
        return register(ctx, tx, arrival, preloaded)
    return nodes.hello(
        ctx, tx, arrival.node_id, set(arrival.known), preloaded, arrival.kept_workflows
    )


def apply_all(ctx: EngineContext, tx: Transaction, arrivals: Iterable[Arrival]) -> list[Any]:
    """Apply ``arrivals`` in order in ``tx``, what they read read once for all of them;
    each one's answer in turn."""
    arrivals = list(arrivals)
    preloaded = nodes.preload(
        ctx,
        tx,
        [arrival.name for arrival in arrivals if isinstance(arrival, Registration)],
        [
            (arrival.node_id, set(arrival.known))
            for arrival in arrivals
            if isinstance(arrival, Hello)
        ],
        {
            workflow_id
            for arrival in arrivals
            if isinstance(arrival, Hello)
            for workflow_id in arrival.kept_workflows
        },
    )
    return [apply(ctx, tx, arrival, preloaded) for arrival in arrivals]


class Arrivals:
    """The Registers and Hellos waiting for the event loop's next turn
    (:class:`~fuzzball_core.orchestrate.turn_batches.TurnBatches`)."""

    def __init__(self, ctx: EngineContext, change: Change) -> None:
        self._batches: TurnBatches[Arrival] = TurnBatches(
            change,
            lambda tx, arrivals: apply_all(ctx, tx, arrivals),
            lambda tx, arrival: apply(ctx, tx, arrival),
            max_batch=MAX_BATCH,
            what="node arrivals",
            gather=GATHER,
        )

    @property
    def batches(self) -> int:
        """How many batches were applied."""
        return self._batches.batches

    @property
    def applied(self) -> int:
        """How many arrivals the batches held."""
        return self._batches.applied

    async def register(self, registration: Registration) -> str:
        """Record a node's Register with the others of this turn; its node id."""
        node_id: str = await self._batches.add(registration)
        return node_id

    async def hello(
        self, node_id: str, known: Iterable[int], kept_workflows: Iterable[str] = ()
    ) -> list[int]:
        """Reconcile a node's Hello with the others of this turn; the runs it is to drop
        (:func:`nodes.hello`)."""
        unwanted: list[int] = await self._batches.add(
            Hello(node_id, frozenset(known), frozenset(kept_workflows))
        )
        return unwanted
