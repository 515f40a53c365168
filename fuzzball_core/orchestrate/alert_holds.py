"""Holds from Alertmanager's notifications: what the monitoring webhook receiver does.

An alert acts on the node its ``node`` label names (name or id) when it carries
``fb_action`` (``cordon``, ``evict`` or ``deprovision``):

* **firing**: a hold with that effect, source ``monitoring``, its reason the alert's name and
  summary, ``placed_by`` the alert's identity (``alert NAME FINGERPRINT``), so that one alert
  places one hold however often Alertmanager repeats it;
* **resolved** with ``fb_release: "true"``: the holds that alert placed are released, and no
  other (an operator's, another alert's); without ``fb_release`` they stay for an operator.

**The ceiling**: monitoring holds may cover at most ``node-health.max-monitoring-held-percent``
of a pool's nodes (the nodes of one provisioner definition, by their
``fuzzball.io/provisioner-definition`` annotation, or the static nodes without it), rounded
down. A hold past it is refused, recorded as a ``node_hold_refused`` event on the node, and
``fuzzball_monitoring_hold_ceiling_reached{pool}`` is 1 while a refused alert still fires, so
FuzzballNodeHoldCeilingReached fires. A node with ``health.disabled: true`` is never held.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from fuzzball_core.errors import InvalidArgument, NotFound
from fuzzball_core.orchestrate import events, nodes
from fuzzball_core.orchestrate.engine import Engine
from fuzzball_core.orchestrate.node_metrics import NodeTargets
from fuzzball_core.orchestrate.states import DEPROVISIONED
from fuzzball_core.orchestrate.transaction import Transaction
from fuzzball_core.scheduling import Hold, HoldEffect, HoldSource
from fuzzball_core.store.models import Node, NodeHold
from fuzzball_core.vocabulary import EventKind

log = logging.getLogger("fuzzball.orchestrate.monitoring")

#: the annotation naming a node's provisioner definition (its pool for the ceiling)
POOL_ANNOTATION = "fuzzball.io/provisioner-definition"
#: the pool of nodes no provisioner made
STATIC_POOL = "static"
ACTIONS = frozenset(effect.value for effect in HoldEffect)


@dataclass(frozen=True)
class Outcome:
    """What one alert of a notification did: ``placed``, ``already held``, ``released``,
    ``kept`` (resolved without fb_release), ``refused`` (and why) or ``ignored``."""

    alert: str
    node: str
    result: str
    detail: str = ""


def pool_of(node: Node) -> str:
    """The ceiling's pool of ``node``."""
    return (node.annotations or {}).get(POOL_ANNOTATION) or STATIC_POOL


def ceiling(pool_size: int, percent: float) -> int:
    """How many of a pool's ``pool_size`` nodes monitoring may hold (rounded down)."""
    return math.floor(pool_size * percent / 100 + 1e-9)


def _identity(alert: Mapping[str, Any]) -> str:
    labels = alert.get("labels") or {}
    return f"alert {labels.get('alertname', '?')} {alert.get('fingerprint') or '-'}"


class AlertHolds:
    """Applies Alertmanager's webhook notifications to node holds."""

    def __init__(self, engine: Engine, targets: NodeTargets, max_held_percent: float) -> None:
        self.engine = engine
        self.targets = targets
        self.max_held_percent = max_held_percent
        #: pool -> identities of firing alerts whose hold the ceiling refused
        self._refused: dict[str, set[str]] = {}

    def ceiling_reached(self) -> dict[str, bool]:
        """Per pool that had a refusal: whether a refused alert still fires there."""
        return {pool: bool(alerts) for pool, alerts in self._refused.items()}

    def notify(self, payload: Any) -> list[Outcome]:
        """Apply one notification (Alertmanager's webhook JSON, version 4)."""
        if not isinstance(payload, dict) or not isinstance(payload.get("alerts"), list):
            raise InvalidArgument("alerts: an Alertmanager webhook notification has a list")
        return [self._apply(alert) for alert in payload["alerts"]]

    def _apply(self, alert: Any) -> Outcome:
        if not isinstance(alert, dict) or not isinstance(alert.get("labels") or {}, dict):
            return Outcome("?", "", "ignored", "not an alert object")
        labels: dict[str, Any] = alert.get("labels") or {}
        name = str(labels.get("alertname", "?"))
        action, node_ref = labels.get("fb_action"), str(labels.get("node", ""))
        if action is None:
            return Outcome(name, node_ref, "ignored", "no fb_action label")
        if action not in ACTIONS:
            return Outcome(
                name,
                node_ref,
                "ignored",
                f"fb_action {action!r} is not one of {', '.join(sorted(ACTIONS))}",
            )
        if not node_ref:
            return Outcome(name, "", "ignored", "no node label")
        identity = _identity(alert)
        try:
            if alert.get("status") == "resolved":
                return self.engine.change(lambda tx: self._resolved(tx, alert, identity, name))
            return self.engine.change(lambda tx: self._firing(tx, alert, identity, name, action))
        except NotFound:
            return Outcome(name, node_ref, "ignored", f"no node {node_ref}")

    def _firing(
        self, tx: Transaction, alert: dict[str, Any], identity: str, name: str, action: str
    ) -> Outcome:
        labels = alert["labels"]
        node = nodes.find(tx.session, str(labels["node"]))
        held = nodes.holds(tx.session, node.id)
        if any(h.placed_by == identity and h.effect == action for h in held):
            return Outcome(name, node.name, "already held")
        pool = pool_of(node)
        refusal = self._refusal(tx, node, pool, held)
        if refusal:
            self._refused.setdefault(pool, set()).add(identity)
            events.record(
                tx,
                EventKind.NODE_HOLD_REFUSED,
                f"monitoring {action} hold on {node.name} for {name} refused: {refusal}",
                node_id=node.id,
                effect=action,
                source=HoldSource.MONITORING.value,
                alert=name,
                pool=pool,
            )
            log.warning("%s on node %s: hold refused: %s", name, node.name, refusal)
            return Outcome(name, node.name, "refused", refusal)
        summary = str((alert.get("annotations") or {}).get("summary", "")).strip()
        reason = f"{name}: {summary}" if summary else name
        hold = Hold(HoldEffect(action), HoldSource.MONITORING, reason, identity)
        nodes.add_hold(self.engine.context, tx, node.id, hold, reason, identity)
        return Outcome(name, node.name, "placed")

    def _refusal(self, tx: Transaction, node: Node, pool: str, held: list[NodeHold]) -> str:
        """Why monitoring may not hold ``node`` now ("" when it may)."""
        if self.targets.get(node.id).health_disabled:
            return "the node has health.disabled: true"
        if any(h.source == HoldSource.MONITORING.value for h in held):
            return ""  # already counted among the pool's monitoring-held nodes
        members = [
            n
            for n in tx.session.scalars(select(Node).where(Node.status != DEPROVISIONED))
            if pool_of(n) == pool
        ]
        monitored = set(
            tx.session.scalars(
                select(NodeHold.node_id).where(NodeHold.source == HoldSource.MONITORING.value)
            )
        )
        held_now = sum(1 for n in members if n.id in monitored)
        allowed = ceiling(len(members), self.max_held_percent)
        if held_now + 1 > allowed:
            return (
                f"the monitoring hold ceiling of pool {pool} is reached: {held_now} of its"
                f" {len(members)} nodes held, at most {self.max_held_percent:g}%"
                f" ({allowed}) by node-health.max-monitoring-held-percent"
            )
        return ""

    def _resolved(
        self, tx: Transaction, alert: dict[str, Any], identity: str, name: str
    ) -> Outcome:
        labels = alert["labels"]
        node = nodes.find(tx.session, str(labels["node"]))
        for refused in self._refused.values():
            refused.discard(identity)
        if str(labels.get("fb_release", "")).lower() != "true":
            return Outcome(name, node.name, "kept", "no fb_release: an operator releases it")
        mine = [h for h in nodes.holds(tx.session, node.id) if h.placed_by == identity]
        for hold in mine:
            nodes.release_holds(
                self.engine.context, tx, node.id, hold_id=hold.id, released_by=f"{name} resolved"
            )
        return Outcome(
            name, node.name, "released" if mine else "ignored", "" if mine else "it held nothing"
        )


def outcomes_json(outcomes: Iterable[Outcome]) -> list[dict[str, str]]:
    """The webhook's answer body: what each alert did."""
    return [
        {"alert": o.alert, "node": o.node, "result": o.result, "detail": o.detail} for o in outcomes
    ]
