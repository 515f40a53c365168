"""A node's hold state, as the dashboard counts and the nodes page filters: one of
:data:`HOLD_STATES`, from its status and the strongest effect among its holds."""

from __future__ import annotations

from fuzzball_core.service.views import NodeView
from fuzzball_core.vocabulary import NodeStatus

HOLD_STATES = ("ready", "cordoned", "evicting", "deprovisioning", "offline")
#: hold effects by strength: a deprovision hold also evicts, an evict hold also cordons
_EFFECT_STATES = (("deprovision", "deprovisioning"), ("evict", "evicting"), ("cordon", "cordoned"))


def hold_state(node: NodeView) -> str:
    """``node``'s hold state. A node torn down by a deprovision hold counts as
    deprovisioning; one that stopped reporting is offline whatever its holds."""
    if node.status == NodeStatus.DEPROVISIONED:
        return "deprovisioning"
    if node.status != NodeStatus.READY:
        return "offline"
    effects = {hold.effect for hold in node.holds}
    return next((state for effect, state in _EFFECT_STATES if effect in effects), "ready")
