"""The engine's node side: registration, leases, holds, deprovisioning and removal.

:class:`NodeLifecycle` is the part of :class:`~fuzzball_core.orchestrate.engine.Engine`
that changes nodes rather than workflows; it is a base class of the engine and works
through the engine's transactions, events and run endings, declared below.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.errors import FailedPrecondition, NotFound
from fuzzball_core.orchestrate.retries import NODE as NODE_CAUSE
from fuzzball_core.orchestrate.transaction import (
    ASSIGNED,
    DEPROVISIONED,
    LIVE_RUN,
    OFFLINE,
    READY,
    Transaction,
    task_label,
)
from fuzzball_core.scheduling import Hold, HoldEffect, HoldSource, NodeInfo, Resources, Scheduler
from fuzzball_core.service.views import FAILED
from fuzzball_core.store.models import Node, NodeHold, Run, Stage


class NodeLifecycle:
    """Node transitions of the engine (a base class of ``Engine``)."""

    # provided by the engine
    scheduler: Scheduler
    lease_seconds: float
    _node_names: dict[str, str]
    _device_plugin_failed: dict[str, bool]
    _transaction: Callable[[], Transaction]
    _commit: Callable[[Transaction], None]
    _event: Callable[..., None]
    _finish_run: Callable[..., None]
    _send_assignment: Callable[[Transaction, Run], None]
    wake: Callable[[], None]

    # -- nodes ---------------------------------------------------------------------------------

    def register_node(
        self,
        name: str,
        capacity: Resources,
        annotations: dict[str, str],
        *,
        device_plugin_failed: bool = False,
    ) -> str:
        """Record a node (new, or returning under the same name); return its id."""
        tx = self._transaction()
        with tx.session:
            node = tx.session.scalars(select(Node).where(Node.name == name)).first()
            returning = node is not None
            if node is None:
                node = Node(id=str(uuid.uuid4()), name=name, registered_at=tx.now)
                tx.session.add(node)
            node.status = READY
            node.cores = capacity.cores
            node.memory = capacity.memory
            node.devices = dict(capacity.devices)
            node.annotations = dict(annotations)
            node.last_seen = tx.now
            node.lease_expires_at = tx.now + self.lease_seconds
            self._node_names[node.id] = name
            self._device_plugin_failed[node.id] = device_plugin_failed
            tx.session.flush()
            self._refresh_node(tx, node)
            self._event(
                tx,
                "node_registered",
                f"node {name} {'re-registered' if returning else 'registered'}:"
                f" {capacity.describe()}",
                node_id=node.id,
            )
            self._commit(tx)
        self.wake()
        return node.id

    def node_message(self, node_id: str, message: node_pb2.NodeMessage) -> None:
        """Queue a message from a node's stream for the next pass."""
        self._inbox.append((node_id, message))
        self.wake()

    def node_hello(self, node_id: str, known_run_ids: Iterable[int]) -> list[int]:
        """A node (re)connected knowing these runs: reconcile, and return the ones to drop.

        Runs assigned to the node that it never received are sent again; runs it should be
        running but no longer knows failed with it; runs it knows that are over (or were
        never ours) are returned so the node stops them.
        """
        known = set(known_run_ids)
        tx = self._transaction()
        unwanted: list[int] = []
        with tx.session:
            node = tx.session.get(Node, node_id)
            if node is None:
                raise NotFound(f"node {node_id} is not registered")
            self._renew(tx, node)
            self._refresh_node(tx, node)
            for run in self._running_parts_on(tx.session, node_id):
                if run.id in known:
                    continue
                if run.status == ASSIGNED:
                    self._send_assignment(tx, run)
                else:
                    self._finish_run(
                        tx,
                        run,
                        FAILED,
                        f"node {node.name} restarted and no longer runs this job",
                        None,
                        cause=NODE_CAUSE,
                    )
            for run_id in known:
                run = tx.session.get(Run, run_id)
                if run is None or run.status not in LIVE_RUN or node_id not in run.node_ids:
                    unwanted.append(run_id)
            self._commit(tx)
        self.wake()
        return unwanted

    def extend_leases(self, seconds: float) -> None:
        """Push every live node's lease ``seconds`` further (Orchestrate was stalled)."""
        with self._transaction().session as session:
            for node in session.scalars(select(Node).where(Node.status == READY)):
                node.lease_expires_at += seconds
            session.commit()

    def _renew(self, tx: Transaction, node: Node) -> None:
        node.last_seen = tx.now
        node.lease_expires_at = tx.now + self.lease_seconds
        if node.status == OFFLINE:
            node.status = READY
            self._refresh_node(tx, node)
            self._event(tx, "node_online", f"node {node.name} is back", node_id=node.id)

    def _live_runs_on(self, session: Session, node_id: str) -> list[Run]:
        """Runs holding the node, including multinode runs whose part here has ended."""
        runs = session.scalars(select(Run).where(Run.status.in_(LIVE_RUN)))
        return [run for run in runs if node_id in run.node_ids]

    def _running_parts_on(self, session: Session, node_id: str) -> list[Run]:
        """Runs with something still running on the node."""
        return [
            run
            for run in self._live_runs_on(session, node_id)
            if node_id not in (run.parts_done or ())
        ]

    def _expire_leases(self, tx: Transaction) -> None:
        expired = tx.session.scalars(
            select(Node).where(Node.status == READY, Node.lease_expires_at < tx.now)
        )
        for node in expired:
            node.status = OFFLINE
            # the provisioner's holds end with the machine; a site's own holds (admin,
            # monitoring) stay, so a node held for repair comes back still held
            for hold in self._holds(tx.session, node.id):
                if hold.source == HoldSource.PROVISIONER:
                    self._drop_hold(tx, node, hold, "the node went offline")
            self._refresh_node(tx, node)
            self._event(tx, "node_offline", f"node {node.name} stopped responding", node_id=node.id)
            for run in self._running_parts_on(tx.session, node.id):
                self._finish_run(
                    tx, run, FAILED, f"node {node.name} stopped responding", None, cause=NODE_CAUSE
                )

    # -- holds ---------------------------------------------------------------------------------

    def _holds(self, session: Session, node_id: str) -> list[NodeHold]:
        return list(
            session.scalars(
                select(NodeHold).where(NodeHold.node_id == node_id).order_by(NodeHold.id)
            )
        )

    def _refresh_node(self, tx: Transaction, node: Node) -> None:
        """Tell the scheduler the node's readiness and holds as the database has them."""
        self.scheduler.upsert_node(
            node_info(
                node,
                ready=node.status == READY,
                holds=self._holds(tx.session, node.id),
                device_plugin_failed=self._device_plugin_failed.get(node.id, False),
            )
        )

    def find_node(self, session: Session, reference: str) -> Node:
        """A node by id or name; ``NotFound`` otherwise."""
        node = (
            session.get(Node, reference)
            or session.scalars(select(Node).where(Node.name == reference)).first()
        )
        if node is None:
            raise NotFound(f"node {reference} not found")
        return node

    def add_hold(self, node_ref: str, effect: str, source: str, reason: str, placed_by: str) -> int:
        """Place a hold; ``evict`` also takes running work off. Return the hold's id."""
        hold = Hold(effect, source, reason, placed_by)  # validates effect and source
        tx = self._transaction()
        with tx.session:
            node = self.find_node(tx.session, node_ref)
            row = NodeHold(
                node_id=node.id,
                effect=hold.effect.value,
                source=hold.source.value,
                reason=reason,
                placed_by=placed_by,
                placed_at=tx.now,
            )
            tx.session.add(row)
            tx.session.flush()
            self._refresh_node(tx, node)
            self._event(
                tx,
                "node_hold_added",
                f"{hold.effect.value} hold placed on {node.name} by {placed_by}"
                f" ({hold.source.value}): {reason or 'no reason given'}",
                node_id=node.id,
                hold_id=row.id,
                effect=hold.effect.value,
                source=hold.source.value,
                reason=reason,
            )
            if hold.effect is HoldEffect.EVICT:
                self._evict(tx, node, reason or "evicted by an administrator")
            hold_id = row.id
            self._commit(tx)
        self.wake()
        return hold_id

    def release_holds(
        self,
        node_ref: str,
        *,
        hold_id: int | None = None,
        effect: str | None = None,
        source: str | None = None,
        released_by: str = "",
    ) -> int:
        """Release the node's holds that match every given filter; return how many."""
        tx = self._transaction()
        with tx.session:
            node = self.find_node(tx.session, node_ref)
            released = 0
            for hold in self._holds(tx.session, node.id):
                if hold_id is not None and hold.id != hold_id:
                    continue
                if effect is not None and hold.effect != effect:
                    continue
                if source is not None and hold.source != source:
                    continue
                self._drop_hold(tx, node, hold, f"released by {released_by or 'an operator'}")
                released += 1
            if hold_id is not None and not released:
                raise NotFound(f"node {node.name} has no hold {hold_id}")
            self._refresh_node(tx, node)
            self._commit(tx)
        self.wake()
        return released

    def _drop_hold(self, tx: Transaction, node: Node, hold: NodeHold, why: str) -> None:
        tx.session.delete(hold)
        self._event(
            tx,
            "node_hold_released",
            f"{hold.effect} hold on {node.name} ({hold.source}: {hold.reason}) {why}",
            node_id=node.id,
            hold_id=hold.id,
            effect=hold.effect,
            source=hold.source,
        )

    def _evict(self, tx: Transaction, node: Node, reason: str) -> None:
        for run in self._running_parts_on(tx.session, node.id):
            for node_id in run.node_ids:
                tx.outbox.append(
                    (
                        node_id,
                        node_pb2.ControlMessage(
                            cancel=node_pb2.Cancel(run_id=run.id, reason=f"evicted: {reason}")
                        ),
                    )
                )
            stage = tx.session.get(Stage, run.stage_id)
            self._event(
                tx,
                "evicted",
                f"{stage.name if stage else '?'}{task_label(run)}"
                f" evicted from {node.name}: {reason}",
                workflow_id=run.workflow_id,
                stage_name=stage.name if stage else None,
                node_id=node.id,
                task_id=run.task_id,
            )
            self._finish_run(
                tx, run, FAILED, f"evicted from node {node.name}: {reason}", None, cause=NODE_CAUSE
            )

    def _deprovision_empty_nodes(self, tx: Transaction) -> None:
        held_ids = select(NodeHold.node_id).where(NodeHold.effect == HoldEffect.DEPROVISION.value)
        held = tx.session.scalars(select(Node).where(Node.id.in_(held_ids), Node.status == READY))
        for node in held:
            if self._live_runs_on(tx.session, node.id):
                continue
            node.status = DEPROVISIONED
            self._refresh_node(tx, node)
            tx.outbox.append(
                (
                    node.id,
                    node_pb2.ControlMessage(
                        shutdown=node_pb2.Shutdown(reason="deprovisioned: the node is empty")
                    ),
                )
            )
            self._event(
                tx,
                "node_deprovisioned",
                f"node {node.name} is empty and was torn down",
                node_id=node.id,
            )

    def remove_node(self, node_ref: str) -> None:
        """Forget a node that is no longer up (offline or deprovisioned), with its holds."""
        tx = self._transaction()
        with tx.session:
            node = self.find_node(tx.session, node_ref)
            if node.status == READY:
                raise FailedPrecondition(
                    f"node {node.name} is still up: only offline or deprovisioned nodes can"
                    " be removed (deprovision it first)"
                )
            if self._live_runs_on(tx.session, node.id):
                raise FailedPrecondition(f"node {node.name} still has work recorded on it")
            for hold in self._holds(tx.session, node.id):
                self._drop_hold(tx, node, hold, "with the node's record")
            tx.session.flush()  # the holds go before the node row they point to
            with contextlib.suppress(NotFound):
                self.scheduler.remove_node(node.id)
            self._event(tx, "node_removed", f"node {node.name} was removed", node_id=node.id)
            tx.session.delete(node)
            self._node_names.pop(node.id, None)
            self._commit(tx)


def node_info(
    node: Node,
    *,
    ready: bool,
    holds: Iterable[NodeHold] = (),
    device_plugin_failed: bool = False,
) -> NodeInfo:
    return NodeInfo(
        id=node.id,
        capacity=Resources(node.cores, node.memory, dict(node.devices or {})),
        annotations=dict(node.annotations or {}),
        holds=tuple(Hold(h.effect, h.source, h.reason, h.placed_by, h.placed_at) for h in holds),
        ready=ready,
        device_plugin_failed=device_plugin_failed,
    )
