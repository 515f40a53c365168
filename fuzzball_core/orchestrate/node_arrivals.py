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

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from fuzzball_core.orchestrate import node_versions, nodes
from fuzzball_core.orchestrate.context import EngineContext
from fuzzball_core.orchestrate.transaction import Transaction
from fuzzball_core.scheduling import CpuCore, Resources

log = logging.getLogger(__name__)


#: The most arrivals one transaction applies; the rest wait for the loop's next turn. A
#: batch holds the loop while it runs (a few ms of CPU per node), and the REST gateway, the
#: engine's passes and the streams' reads get their turns between batches.
MAX_BATCH = 64

#: How the engine runs one transaction and publishes it (``Engine.change``).
Change = Callable[[Callable[[Transaction], Any]], Any]


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
    """A node's Hello on a new Connect stream: the runs it knows."""

    node_id: str
    known: frozenset[int]


Arrival = Registration | Hello


def apply(ctx: EngineContext, tx: Transaction, arrival: Arrival, preloaded: Any = None) -> Any:
    """Apply one arrival in ``tx``: a Registration's node id, a Hello's runs to drop."""
    if isinstance(arrival, Registration):
        return register(ctx, tx, arrival, preloaded)
    return nodes.hello(ctx, tx, arrival.node_id, set(arrival.known), preloaded)


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
    )
    return [apply(ctx, tx, arrival, preloaded) for arrival in arrivals]


class Arrivals:
    """The Registers and Hellos waiting for the event loop's next turn."""

    def __init__(self, ctx: EngineContext, change: Change) -> None:
        self._ctx = ctx
        self._change = change
        self._waiting: list[tuple[Arrival, asyncio.Future[Any]]] = []
        #: how many batches were applied, and how many arrivals they held
        self.batches = 0
        self.applied = 0

    async def register(self, registration: Registration) -> str:
        """Record a node's Register with the others of this turn; its node id."""
        node_id: str = await self._arrive(registration)
        return node_id

    async def hello(self, node_id: str, known: Iterable[int]) -> list[int]:
        """Reconcile a node's Hello with the others of this turn; the runs it is to drop
        (:func:`nodes.hello`)."""
        unwanted: list[int] = await self._arrive(Hello(node_id, frozenset(known)))
        return unwanted

    def _arrive(self, arrival: Arrival) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[Any] = loop.create_future()
        if not self._waiting:
            # after what the loop has ready now: the arrivals read off the wire meanwhile
            # (hundreds at once after a restart) join this batch
            loop.call_soon(self._apply)
        self._waiting.append((arrival, answer))
        return answer

    def _apply(self) -> None:
        batch, self._waiting = self._waiting[:MAX_BATCH], self._waiting[MAX_BATCH:]
        if self._waiting:
            asyncio.get_running_loop().call_soon(self._apply)  # the rest, after other work
        self.batches += 1
        self.applied += len(batch)
        if len(batch) > 1:
            arrivals = [arrival for arrival, _ in batch]
            try:
                answers = self._change(lambda tx: apply_all(self._ctx, tx, arrivals))
            except Exception as exc:  # each is tried alone below, and answered for itself
                log.info("%d node arrivals failed together (%s); each alone", len(batch), exc)
            else:
                for (_, future), answer in zip(batch, answers, strict=True):
                    _answer(future, answer)
                return
        for arrival, future in batch:
            try:
                answer = self._change(_applying(self._ctx, arrival))
            except Exception as exc:  # the arrival's own RPC answers with it
                _answer(future, error=exc)
            else:
                _answer(future, answer)


def _applying(ctx: EngineContext, arrival: Arrival) -> Callable[[Transaction], Any]:
    """The unit of work applying ``arrival`` alone."""
    return lambda tx: apply(ctx, tx, arrival)


def _answer(
    future: asyncio.Future[Any], answer: Any = None, error: Exception | None = None
) -> None:
    """Settle an arrival's future, unless its caller has gone (a cancelled RPC)."""
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(answer)
