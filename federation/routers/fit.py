"""``fit``: send a workflow to a healthy member where every job fits, the cheapest and
soonest first, and say why about every member.

For each job and service of the workflow a member offers, in this order:

1. **free capacity**: enough of its ready, unheld nodes have each the free cores, memory,
   devices (by kind; by model through the ``<kind>.model`` annotation) and annotations the
   job asks for per node. It starts now and costs the member's ``price-per-hour`` label per
   node-hour (0 without one);
2. **provisionable capacity**: one of its provisioner definitions holds the job. It starts
   after the definition's ``startupTimeEstimate`` and costs its ``costPerHourEstimate`` per
   node-hour (the cheapest such definition, then the quickest);
3. **queued**: enough of its nodes could hold it, but are busy now. It costs the member's
   price; when it starts is unknown.

A member none of these holds a job in is rejected with the first shortfall
(``largest node has 4 cores, jobs.main needs 64``). So is a member lacking a storage class
one of the workflow's volumes names, or having it disabled (``no storage class 'fast'
(volumes.data)``), by the classes its offer lists; a member that did not say which it has is
not rejected for storage. A job's hours are its
``policy.timeout.execute``; one that declares none is priced for ``default-hours`` (router
option, 1) and the decision says so.

A workflow mounting a named persistent volume that lives on members (found by the caller:
:meth:`FitRouter.decide`'s ``volume_locations``) goes to a member holding it; any other member
is ranked with the data movement it would need: the volume's bytes times the holder's
``egress-price-per-gib`` label added to its cost, and bytes over the holder's
``egress-gib-per-second`` added to its start. Federate copies no volume data itself.

Eligible members are ordered by, first to last: ``prefer`` (router option,
``{label: value}``: members matching more come first); what the
``fuzzball_federate_score_cluster`` hooks return (higher first; ``-inf`` excludes); holding the
workflow's persistent volumes; starting without waiting for busy nodes; the estimated cost
(compute plus data movement); the estimated start delay; free room (cores plus GiB); the name.

Router options: ``prefer`` (mapping), ``default-hours`` (positive number). The former
``cost-label`` and ``cost-weight`` are refused naming their replacement (the member's
``price-per-hour`` label and a cost estimated per workflow).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fuzzball_core.drivers import ClusterOffer, Router
from fuzzball_core.errors import InvalidArgument
from fuzzball_federation.needs import (
    GIB,
    StepNeed,
    StorageNeed,
    VolumeNeed,
    workflow_needs,
    workflow_storage,
    workflow_volumes,
)
from fuzzball_federation.offers import DEFAULT_EGRESS_RATE, NodeShape, Provisionable

#: how a job would run on a member
FREE, PROVISION, QUEUED = "free", "provision", "queued"

#: eligible members a decision's summary and data detail (the rest are counted)
SHOWN = 5

#: where each persistent volume lives: reference -> {member name: size in bytes}
VolumeLocations = Mapping[str, Mapping[str, int]]

_RETIRED_OPTIONS = {
    "cost-label": "a member's price is its price-per-hour label",
    "cost-weight": "the cost is estimated per workflow and ranks members after capacity",
}


def _nodes_of(offer: ClusterOffer) -> tuple[NodeShape, ...]:
    """The offer's node shapes; a plain ClusterOffer is one free node of its largest size."""
    nodes = getattr(offer, "nodes", None)
    if nodes is not None:
        return tuple(nodes)
    return (
        NodeShape(
            name=offer.name,
            cores=offer.largest_node_cores,
            memory=offer.largest_node_memory,
            devices=dict(offer.free_devices),
            free_cores=offer.largest_node_cores,
            free_memory=offer.largest_node_memory,
            free_devices=dict(offer.free_devices),
        ),
    )


def storage_problem(offer: ClusterOffer, storage: Sequence[StorageNeed]) -> str | None:
    """Why ``offer`` cannot hold the workflow's volumes (a storage class it lacks or has
    disabled), naming the class and the volume; None when it can, or when it did not say
    which classes it has."""
    classes = getattr(offer, "storage_classes", None)
    if classes is None:
        return None
    for need in storage:
        found = classes.get(need.storage_class)
        if found is None:
            return f"no storage class {need.storage_class!r} (volumes.{need.name})"
        if not found.ready:
            return f"storage class {need.storage_class!r} is disabled (volumes.{need.name})"
    return None


def _annotation_missing(key: str, value: str) -> str:
    kind, dot, attribute = key.rpartition(".")
    if dot and attribute == "model" and "/" in kind:
        return f"no node has a {kind} of model {value}"
    return f"no node has annotation {key}={value}"


def _missing(
    need: StepNeed, nodes: Sequence[NodeShape], definitions: Sequence[Provisionable] = ()
) -> str:
    """Why no node (or too few) of a member, and none of its definitions, holds ``need``,
    naming the first shortfall."""
    shapes: list[NodeShape | Provisionable] = [*nodes, *definitions]
    if not shapes:
        return "has no ready node"
    for kind, count in sorted(need.devices.items()):
        if not any(n.devices.get(kind, 0) >= count for n in shapes):
            have = max(n.devices.get(kind, 0) for n in shapes)
            return f"no node has {kind}" if have == 0 else f"no node has {count} {kind}"
    for key, value in sorted(need.annotations.items()):
        if not any(n.annotations.get(key) == value for n in shapes):
            return _annotation_missing(key, value)
    if not any(n.cores >= need.cores for n in shapes):
        biggest_cores = max(n.cores for n in shapes)
        return f"largest node has {biggest_cores} cores, {need.name} needs {need.cores}"
    if not any(n.memory >= need.memory for n in shapes):
        biggest = max(n.memory for n in shapes) / GIB
        return f"largest node has {biggest:.4g} GiB, {need.name} needs {need.memory / GIB:.4g} GiB"
    fitting = sum(n.count for n in nodes if need.fits(n))
    if fitting < need.nodes:
        return f"{fitting} node(s) can hold {need.name}, it needs {need.nodes}"
    return f"no single node holds everything {need.name} asks for"


@dataclass(frozen=True)
class JobPlan:
    """How one job would run on a member: on free nodes, a definition's new nodes, or
    queued; its cost and when it could start (None: when busy nodes free up)."""

    need: StepNeed
    how: str
    cost: float
    hours: float
    start: float | None = 0.0
    definition: str = ""

    def describe(self) -> str:
        """``jobs.main: definition gpu (+300 s), 1 h at $3/h``."""
        if self.how == PROVISION:
            where = f"new node(s) of definition {self.definition} (+{self.start:.0f} s)"
        elif self.how == QUEUED:
            where = "busy nodes (queued)"
        else:
            where = "free nodes"
        return f"{self.need.name} on {where}, {self.hours:.3g} h, ${self.cost:.2f}"


@dataclass(frozen=True)
class MemberEstimate:
    """What running a workflow on one member would cost and when it would start."""

    name: str
    jobs: tuple[JobPlan, ...]
    compute_cost: float
    data_cost: float = 0.0
    data_seconds: float = 0.0
    moves_data: bool = False
    preferred: int = 0
    hooks: float = 0.0
    room: float = 0.0
    notes: tuple[str, ...] = ()

    @property
    def cost(self) -> float:
        """Compute plus data movement, in the members' price unit."""
        return self.compute_cost + self.data_cost

    @property
    def queued(self) -> bool:
        """Whether a job waits for busy nodes (its start is unknown)."""
        return any(job.start is None for job in self.jobs)

    @property
    def start_delay(self) -> float | None:
        """Seconds until every job could start (data moved, nodes provisioned); None when
        a job waits for busy nodes."""
        if self.queued:
            return None
        return self.data_seconds + max((job.start or 0.0 for job in self.jobs), default=0.0)

    def rank(self) -> tuple[Any, ...]:
        """The sort key: see the module's order."""
        delay = self.start_delay
        return (
            -self.preferred,
            -self.hooks,
            self.moves_data,
            self.queued,
            self.cost,
            math.inf if delay is None else delay,
            -self.room,
            self.name,
        )

    def describe(self) -> str:
        """One line: cost, start, and each job's plan."""
        delay = self.start_delay
        start = "waits for busy nodes" if delay is None else f"starts in ~{delay:.0f} s"
        data = f", data movement ${self.data_cost:.2f}" if self.moves_data else ""
        return (
            f"est. ${self.cost:.2f}{data}, {start} ({'; '.join(j.describe() for j in self.jobs)})"
        )

    def as_data(self) -> dict[str, Any]:
        """The estimate as an event's data."""
        delay = self.start_delay
        return {
            "cluster": self.name,
            "costEstimate": round(self.cost, 4),
            "computeCost": round(self.compute_cost, 4),
            "dataMovementCost": round(self.data_cost, 4),
            "dataMovementSeconds": round(self.data_seconds, 1),
            "startDelaySeconds": None if delay is None else round(delay, 1),
            "jobs": {
                job.need.name: {
                    "capacity": job.how,
                    **({"definition": job.definition} if job.definition else {}),
                    "hours": round(job.hours, 4),
                    "cost": round(job.cost, 4),
                }
                for job in self.jobs
            },
            **({"notes": list(self.notes)} if self.notes else {}),
        }


@dataclass(frozen=True)
class Decision:
    """A routing decision: the eligible members best first, with their estimates, and why
    every other member was rejected."""

    chosen: tuple[str, ...]
    estimates: Mapping[str, MemberEstimate] = field(default_factory=dict)
    rejected: Mapping[str, str] = field(default_factory=dict)
    #: narrowed to one member by the start request's ``clusterId``
    pinned: bool = False

    def summary(self, cluster: str | None = None) -> str:
        """``routed to cluster X: est. $…; also eligible: …; rejected: Y (why)``."""
        cluster = cluster or (self.chosen[0] if self.chosen else None)
        parts = []
        how = " (pinned by clusterId)" if self.pinned else ""
        if cluster is not None and cluster in self.estimates:
            parts.append(f"routed to cluster {cluster}{how}: {self.estimates[cluster].describe()}")
        elif cluster is not None:
            parts.append(f"routed to cluster {cluster}{how}")
        rest = [name for name in self.chosen if name != cluster and name in self.estimates]
        others = [f"{name} (est. ${self.estimates[name].cost:.2f})" for name in rest[:SHOWN]]
        if len(rest) > SHOWN:
            others.append(f"{len(rest) - SHOWN} more")
        if others:
            parts.append("also eligible: " + ", ".join(others))
        if self.rejected:
            parts.append(
                "rejected: " + "; ".join(f"{n} ({why})" for n, why in self.rejected.items())
            )
        return "; ".join(parts)

    def as_data(self, cluster: str | None = None) -> dict[str, Any]:
        """The decision as an event's data."""
        cluster = cluster or (self.chosen[0] if self.chosen else None)
        chosen = self.estimates.get(cluster) if cluster else None
        return {
            "cluster": cluster,
            "pinned": self.pinned,
            "costEstimate": round(chosen.cost, 4) if chosen else None,
            # the best few: a large federation's every member would swell each event
            "candidates": [
                self.estimates[n].as_data() for n in self.chosen[:SHOWN] if n in self.estimates
            ],
            "eligible": len(self.chosen),
            "rejected": dict(self.rejected),
        }


def _egress_price(offer: ClusterOffer | None) -> float:
    return float(getattr(offer, "egress_price_per_gib", 0.0))


def _egress_rate(offer: ClusterOffer | None) -> float:
    return float(getattr(offer, "egress_rate", 0.0)) or DEFAULT_EGRESS_RATE


def _cheapest_source(
    holders: Mapping[str, int], offers: Mapping[str, ClusterOffer]
) -> tuple[int, ClusterOffer | None]:
    """The holder to move a volume from: the cheapest, then the quickest (size, offer)."""
    return min(
        ((size, offers.get(name)) for name, size in holders.items()),
        key=lambda pair: (_egress_price(pair[1]) * pair[0], pair[0] / _egress_rate(pair[1])),
    )


def _frozen(mapping: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(mapping.items()))


class _Index:
    """The distinct node shapes and provisioner definitions of a set of offers, each with
    the members that have it: a job is fitted once per distinct shape, and the counts are
    spread to the members (members of one federation share few shapes: instance types)."""

    def __init__(self, clusters: Sequence[ClusterOffer]) -> None:
        self.offers = tuple(clusters)
        self.prices = [float(getattr(o, "price_per_hour", 0.0)) for o in self.offers]
        self.rooms = [o.free_cores + o.free_memory / GIB for o in self.offers]
        self._preferred: tuple[Mapping[str, str], list[int]] | None = None
        shapes: dict[tuple[Any, ...], tuple[NodeShape, list[tuple[int, int]]]] = {}
        definitions: dict[tuple[Any, ...], tuple[Provisionable, list[int]]] = {}
        for i, offer in enumerate(self.offers):
            if not offer.healthy:
                continue
            for shape in _nodes_of(offer):
                key = (
                    shape.cores,
                    shape.memory,
                    _frozen(shape.devices),
                    shape.free_cores,
                    shape.free_memory,
                    _frozen(shape.free_devices),
                    _frozen(shape.annotations),
                )
                shapes.setdefault(key, (shape, []))[1].append((i, shape.count))
            for definition in getattr(offer, "provisionable", ()):
                kind = (
                    definition.cores,
                    definition.memory,
                    _frozen(definition.devices),
                    _frozen(definition.annotations),
                    definition.cost_per_hour,
                    definition.startup,
                    definition.id,
                )
                definitions.setdefault(kind, (definition, []))[1].append(i)
        self.shapes = list(shapes.values())
        # cheapest first, then quickest: the first fitting one a member has is its best
        self.definitions = sorted(
            definitions.values(), key=lambda d: (d[0].cost_per_hour, d[0].startup, d[0].id)
        )

    def same(self, clusters: Sequence[ClusterOffer]) -> bool:
        """Whether ``clusters`` are the very offers indexed (a refresh makes new ones)."""
        return len(clusters) == len(self.offers) and all(
            a is b for a, b in zip(clusters, self.offers, strict=True)
        )

    def preferred(self, prefer: Mapping[str, str]) -> list[int]:
        """Per member, how many of the ``prefer`` labels it matches."""
        if self._preferred is None or self._preferred[0] is not prefer:
            matches = [
                sum(1 for k, v in prefer.items() if o.labels.get(k) == v) for o in self.offers
            ]
            self._preferred = (prefer, matches)
        return self._preferred[1]

    def counts(self, need: StepNeed, *, free: bool) -> list[int]:
        """Per member, how many of its nodes hold ``need`` (free now, or at all)."""
        found = [0] * len(self.offers)
        fits = need.fits_free if free else need.fits
        for shape, where in self.shapes:
            if fits(shape):
                for i, count in where:
                    found[i] += count
        return found

    def cheapest_definition(self, need: StepNeed) -> list[Provisionable | None]:
        """Per member, its cheapest (then quickest) definition holding ``need``."""
        best: list[Provisionable | None] = [None] * len(self.offers)
        for definition, where in self.definitions:
            if need.fits(definition):
                for i in where:
                    if best[i] is None:
                        best[i] = definition
        return best


class _Estimates(Mapping[str, "MemberEstimate"]):
    """The eligible members' estimates, each built the first time it is read."""

    def __init__(self, build: Any, names: Sequence[str]) -> None:
        self._build = build
        self._names = tuple(names)
        self._built: dict[str, MemberEstimate] = {}

    def __getitem__(self, name: str) -> MemberEstimate:
        if name not in self._built:
            if name not in self._names:
                raise KeyError(name)
            found = self._build(name)
            if isinstance(found, str):  # cannot happen: the name was found eligible
                raise KeyError(name)
            self._built[name] = found
        return self._built[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


class FitRouter(Router):
    """Eligible members (healthy, every step fits free, provisionable or busy nodes) ordered
    by preference, data, cost and start."""

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        super().__init__(config)
        for retired, instead in _RETIRED_OPTIONS.items():
            if retired in self.config:
                raise InvalidArgument(
                    f"federate.router-options.{retired}: no longer read ({instead})"
                )
        prefer = self.config.get("prefer", {})
        if not isinstance(prefer, Mapping):
            raise InvalidArgument("federate.router-options.prefer: expected a mapping")
        self.prefer = {str(k): str(v) for k, v in prefer.items()}
        hours = self.config.get("default-hours", 1.0)
        try:
            self.default_hours = float(hours)
        except (TypeError, ValueError):
            self.default_hours = math.nan
        if not (math.isfinite(self.default_hours) and self.default_hours > 0):
            raise InvalidArgument(
                f"federate.router-options.default-hours: expected a positive number, got {hours!r}"
            )
        unknown = sorted(set(self.config) - {"prefer", "default-hours"})
        if unknown:
            raise InvalidArgument(
                f"federate.router-options.{unknown[0]}: unknown option (known: prefer,"
                " default-hours)"
            )
        #: the pluggy hook relay whose ``fuzzball_federate_score_cluster`` adds to the score
        self.hook: Any = None
        self._last_index: _Index | None = None

    def use_hooks(self, hook: Any) -> None:
        """Add the scores of ``hook.fuzzball_federate_score_cluster`` (a pluggy relay)."""
        self.hook = hook

    # -- one member -----------------------------------------------------------------------------

    def _plan(
        self, need: StepNeed, offer: ClusterOffer, nodes: Sequence[NodeShape]
    ) -> JobPlan | str:
        """How ``need`` would run on ``offer``; the reason it cannot, as a string."""
        hours = need.hours if need.hours is not None else self.default_hours
        price = float(getattr(offer, "price_per_hour", 0.0))
        if sum(n.count for n in nodes if need.fits_free(n)) >= need.nodes:
            return JobPlan(need, FREE, price * need.nodes * hours, hours)
        definitions: Sequence[Provisionable] = getattr(offer, "provisionable", ())
        fitting = [d for d in definitions if need.fits(d)]
        if fitting:
            best = min(fitting, key=lambda d: (d.cost_per_hour, d.startup, d.id))
            cost = best.cost_per_hour * need.nodes * hours
            return JobPlan(need, PROVISION, cost, hours, best.startup, best.id)
        if sum(n.count for n in nodes if need.fits(n)) >= need.nodes:
            return JobPlan(need, QUEUED, price * need.nodes * hours, hours, None)
        return _missing(need, nodes, definitions)

    def _hook_score(self, workflow: Mapping[str, Any], offer: ClusterOffer) -> float:
        if self.hook is None:
            return 0.0
        results = self.hook.fuzzball_federate_score_cluster(workflow=workflow, cluster=offer)
        return float(sum(float(r) for r in results if r is not None))

    def estimate(
        self,
        workflow: Mapping[str, Any],
        offer: ClusterOffer,
        *,
        needs: Sequence[StepNeed] | None = None,
        volumes: Sequence[VolumeNeed] = (),
        volume_locations: VolumeLocations | None = None,
        offers: Mapping[str, ClusterOffer] | None = None,
        hooks: float | None = None,
    ) -> MemberEstimate | str:
        """What running ``workflow`` on ``offer`` would cost and when it would start; the
        reason it cannot run there, as a string."""
        if not offer.healthy:
            return getattr(offer, "problem", "") or "unhealthy"
        lacking = storage_problem(offer, workflow_storage(workflow))
        if lacking is not None:
            return lacking
        needs = workflow_needs(workflow) if needs is None else needs
        nodes = _nodes_of(offer)
        plans = []
        for need in needs:
            plan = self._plan(need, offer, nodes)
            if isinstance(plan, str):
                return plan
            plans.append(plan)
        hooks = self._hook_score(workflow, offer) if hooks is None else hooks
        if hooks == -math.inf:
            return "excluded by a fuzzball_federate_score_cluster plugin"
        notes = [
            f"{n.name} declares no policy.timeout.execute: priced for {self.default_hours:g} h"
            for n in needs
            if n.hours is None
        ]
        notes += getattr(offer, "notes", ())
        data_cost = data_seconds = 0.0
        moves = False
        for volume in volumes:
            holders = (volume_locations or {}).get(volume.reference) or {}
            if not holders or offer.name in holders:
                continue
            moves = True
            size, holder = _cheapest_source(holders, offers or {})
            gib = size / GIB
            data_cost += gib * _egress_price(holder)
            data_seconds += gib / _egress_rate(holder)
            where = ", ".join(sorted(holders))
            notes.append(f"volume {volume.name} lives on {where} ({gib:.3g} GiB to move)")
        preferred = sum(1 for k, v in self.prefer.items() if offer.labels.get(k) == v)
        return MemberEstimate(
            name=offer.name,
            jobs=tuple(plans),
            compute_cost=sum(p.cost for p in plans),
            data_cost=data_cost,
            data_seconds=data_seconds,
            moves_data=moves,
            preferred=preferred,
            hooks=hooks,
            room=offer.free_cores + offer.free_memory / GIB,
            notes=tuple(notes),
        )

    # -- the decision ---------------------------------------------------------------------------

    def decide(
        self,
        workflow: Mapping[str, Any],
        clusters: Sequence[ClusterOffer],
        *,
        volume_locations: VolumeLocations | None = None,
    ) -> Decision:
        """Every member's estimate or rejection, and the eligible ones best first.

        Each job is fitted once per distinct node shape and definition of the federation
        (:class:`_Index`, built once per set of offers), not once per member; a member's
        full :class:`MemberEstimate` is built when the decision is read for it."""
        needs = workflow_needs(workflow)
        volumes = workflow_volumes(workflow)
        index = self._index_of(clusters)
        offers, prices = index.offers, index.prices
        by_name = {offer.name: offer for offer in offers}
        count = len(offers)
        # per member: the summed cost, the latest start (inf: a job waits for busy nodes)
        costs = [0.0] * count
        starts = [0.0] * count
        storage = workflow_storage(workflow)
        failed = [
            not offer.healthy or storage_problem(offer, storage) is not None for offer in offers
        ]
        inf = math.inf
        for need in needs:
            hours = need.hours if need.hours is not None else self.default_hours
            node_hours = need.nodes * hours
            free = index.counts(need, free=True)
            definition = index.cheapest_definition(need)
            total: list[int] | None = None
            wanted = need.nodes
            for i in range(count):
                if failed[i]:
                    continue
                if free[i] >= wanted:
                    costs[i] += prices[i] * node_hours
                    continue
                best = definition[i]
                if best is not None:
                    costs[i] += best.cost_per_hour * node_hours
                    if best.startup > starts[i]:
                        starts[i] = best.startup
                    continue
                total = index.counts(need, free=False) if total is None else total
                if total[i] >= wanted:
                    costs[i] += prices[i] * node_hours
                    starts[i] = inf
                else:
                    failed[i] = True
        rejected: dict[str, str] = {}
        ranks = []
        hooks: dict[str, float] = {}
        preferred = index.preferred(self.prefer)
        for i, offer in enumerate(offers):
            if failed[i]:
                # the reason, from the member's own estimate (only members that fail)
                reason = self.estimate(workflow, offer, needs=needs)
                rejected[offer.name] = reason if isinstance(reason, str) else "does not fit"
                continue
            score = 0.0
            if self.hook is not None:
                score = self._hook_score(workflow, offer)
                if score == -inf:
                    rejected[offer.name] = "excluded by a fuzzball_federate_score_cluster plugin"
                    continue
                hooks[offer.name] = score
            cost, delay, moves = costs[i], starts[i], False
            if volumes and volume_locations:
                moves, data_cost, seconds = self._data_movement(
                    offer, volumes, volume_locations, by_name
                )
                cost, delay = cost + data_cost, delay + seconds
            queued = delay == inf
            ranks.append(
                (-preferred[i], -score, moves, queued, cost, delay, -index.rooms[i], offer.name)
            )
        ranks.sort()
        chosen = tuple(rank[-1] for rank in ranks)
        estimates = _Estimates(
            lambda name: self.estimate(
                workflow,
                by_name[name],
                needs=needs,
                volumes=volumes,
                volume_locations=volume_locations,
                offers=by_name,
                hooks=hooks.get(name),
            ),
            chosen,
        )
        return Decision(chosen, estimates, rejected)

    def _index_of(self, clusters: Sequence[ClusterOffer]) -> _Index:
        """The index of ``clusters``, built again only when an offer changed."""
        last = self._last_index
        if last is not None and last.same(clusters):
            return last
        self._last_index = _Index(clusters)
        return self._last_index

    def _data_movement(
        self,
        offer: ClusterOffer,
        volumes: Sequence[VolumeNeed],
        locations: VolumeLocations,
        offers: Mapping[str, ClusterOffer],
    ) -> tuple[bool, float, float]:
        """Whether running on ``offer`` moves volume data, its cost and its seconds."""
        moves, cost, seconds = False, 0.0, 0.0
        for volume in volumes:
            holders = locations.get(volume.reference) or {}
            if not holders or offer.name in holders:
                continue
            moves = True
            size, holder = _cheapest_source(holders, offers)
            gib = size / GIB
            cost += gib * _egress_price(holder)
            seconds += gib / _egress_rate(holder)
        return moves, cost, seconds

    def route(self, workflow: Mapping[str, Any], clusters: Sequence[ClusterOffer]) -> Sequence[str]:
        return list(self.decide(workflow, clusters).chosen)

    def rejections(
        self, workflow: Mapping[str, Any], clusters: Sequence[ClusterOffer]
    ) -> dict[str, str]:
        """Each member that cannot run ``workflow`` with the reason (hook exclusions too)."""
        return dict(self.decide(workflow, clusters).rejected)

    def rejection(self, needs: Sequence[StepNeed], offer: ClusterOffer) -> str | None:
        """Why ``offer`` cannot hold jobs with ``needs`` (hooks not asked); None when it can."""
        if not offer.healthy:
            return getattr(offer, "problem", "") or "unhealthy"
        nodes = _nodes_of(offer)
        for need in needs:
            plan = self._plan(need, offer, nodes)
            if isinstance(plan, str):
                return plan
        return None
