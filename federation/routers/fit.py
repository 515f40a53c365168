"""``fit``: send a workflow to a healthy member where every job fits, the roomiest first.

A member is eligible when it answered (is healthy) and, for every job and service of the
workflow, enough of its ready nodes can each hold the per-node request: cores, memory, each
device kind (``nvidia.com/gpu``) and every required annotation (key=value). Eligible members
are ordered by:

1. ``prefer`` (router option, ``{label: value}``): members whose labels match more of these
   come first;
2. the score: free cores plus free memory in GiB, minus ``cost-weight`` times the member's
   ``cost`` label, plus what each ``fuzzball_federate_score_cluster`` hook returns (a hook
   returning ``-inf`` excludes the member);
3. the ``cost`` label (lower first), then the name.

Router options: ``prefer`` (mapping), ``cost-label`` (default ``cost``), ``cost-weight``
(default 0: cost only breaks ties).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from fuzzball_core.drivers import ClusterOffer, Router
from fuzzball_core.errors import InvalidArgument
from fuzzball_federation.needs import GIB, StepNeed, workflow_needs
from fuzzball_federation.offers import NodeShape


def _nodes_of(offer: ClusterOffer) -> tuple[NodeShape, ...]:
    """The offer's node shapes; a plain ClusterOffer is one node of its largest size."""
    nodes = getattr(offer, "nodes", None)
    if nodes is not None:
        return tuple(nodes)
    return (
        NodeShape(
            name=offer.name,
            cores=offer.largest_node_cores,
            memory=offer.largest_node_memory,
            devices=dict(offer.free_devices),
        ),
    )


def _missing(need: StepNeed, nodes: Sequence[NodeShape]) -> str:
    """Why no node (or too few) of a member holds ``need``, naming the first shortfall."""
    if not nodes:
        return "has no ready node"
    for kind, count in sorted(need.devices.items()):
        if not any(n.devices.get(kind, 0) >= count for n in nodes):
            have = max(n.devices.get(kind, 0) for n in nodes)
            return f"no node has {kind}" if have == 0 else f"no node has {count} {kind}"
    for key, value in sorted(need.annotations.items()):
        if not any(n.annotations.get(key) == value for n in nodes):
            return f"no node has annotation {key}={value}"
    if not any(n.cores >= need.cores for n in nodes):
        biggest_cores = max(n.cores for n in nodes)
        return f"largest node has {biggest_cores} cores, {need.name} needs {need.cores}"
    if not any(n.memory >= need.memory for n in nodes):
        biggest = max(n.memory for n in nodes) / GIB
        return f"largest node has {biggest:.4g} GiB, {need.name} needs {need.memory / GIB:.4g} GiB"
    fitting = sum(1 for n in nodes if need.fits(n))
    if fitting < need.nodes:
        return f"{fitting} node(s) can hold {need.name}, it needs {need.nodes}"
    return f"no single node holds everything {need.name} asks for"


class FitRouter(Router):
    """Eligible members (healthy, every step fits a node) ordered by preference and room."""

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        super().__init__(config)
        prefer = self.config.get("prefer", {})
        if not isinstance(prefer, Mapping):
            raise InvalidArgument("federate.router-options.prefer: expected a mapping")
        self.prefer = {str(k): str(v) for k, v in prefer.items()}
        self.cost_label = str(self.config.get("cost-label", "cost"))
        try:
            self.cost_weight = float(self.config.get("cost-weight", 0.0))
        except (TypeError, ValueError):
            raise InvalidArgument(
                "federate.router-options.cost-weight: expected a number"
            ) from None
        #: the pluggy hook relay whose ``fuzzball_federate_score_cluster`` adds to the score
        self.hook: Any = None

    def use_hooks(self, hook: Any) -> None:
        """Add the scores of ``hook.fuzzball_federate_score_cluster`` (a pluggy relay)."""
        self.hook = hook

    # -- eligibility ----------------------------------------------------------------------------

    def rejection(self, needs: Sequence[StepNeed], offer: ClusterOffer) -> str | None:
        """Why ``offer`` cannot run a workflow with ``needs``; None when it can."""
        if not offer.healthy:
            return getattr(offer, "problem", "") or "unhealthy"
        nodes = _nodes_of(offer)
        for need in needs:
            if sum(1 for n in nodes if need.fits(n)) < need.nodes:
                return _missing(need, nodes)
        return None

    def rejections(
        self, workflow: Mapping[str, Any], clusters: Sequence[ClusterOffer]
    ) -> dict[str, str]:
        """Each member that cannot run ``workflow`` with the reason (hook exclusions too)."""
        needs = workflow_needs(workflow)
        reasons = {}
        for offer in clusters:
            reason = self.rejection(needs, offer)
            if reason is None and math.isinf(self._hook_score(workflow, offer)):
                reason = "excluded by a fuzzball_federate_score_cluster plugin"
            if reason is not None:
                reasons[offer.name] = reason
        return reasons

    # -- ranking --------------------------------------------------------------------------------

    def _cost(self, offer: ClusterOffer) -> float:
        try:
            return float(offer.labels.get(self.cost_label, 0) or 0)
        except ValueError:
            return 0.0

    def _hook_score(self, workflow: Mapping[str, Any], offer: ClusterOffer) -> float:
        if self.hook is None:
            return 0.0
        results = self.hook.fuzzball_federate_score_cluster(workflow=workflow, cluster=offer)
        return float(sum(float(r) for r in results if r is not None))

    def score(self, workflow: Mapping[str, Any], offer: ClusterOffer) -> float:
        """Free room, less weighted cost, plus the hooks' scores (``-inf``: excluded)."""
        hooks = self._hook_score(workflow, offer)
        room = offer.free_cores + offer.free_memory / GIB
        return room - self.cost_weight * self._cost(offer) + hooks

    def route(self, workflow: Mapping[str, Any], clusters: Sequence[ClusterOffer]) -> Sequence[str]:
        needs = workflow_needs(workflow)
        ranked = []
        for offer in clusters:
            if self.rejection(needs, offer) is not None:
                continue
            score = self.score(workflow, offer)
            if score == -math.inf:
                continue
            preferred = sum(1 for k, v in self.prefer.items() if offer.labels.get(k) == v)
            ranked.append((-preferred, -score, self._cost(offer), offer.name))
        return [name for *_, name in sorted(ranked)]
