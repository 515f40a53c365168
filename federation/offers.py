"""What Federate knows of a member cluster when it routes: its capacity, prices and health.

A :class:`MemberOffer` is a :class:`~fuzzball_core.drivers.ClusterOffer` that also carries

* its ready nodes **aggregated by shape** (:class:`NodeShape` with a ``count``): nodes with the
  same total and free capacity, devices and annotations are one entry, so a router's fit is
  O(shapes), not O(nodes). Only READY nodes without a hold count: every hold effect (cordon,
  evict, deprovision; an administrator's or monitoring's) stops new work there;
* its **provisionable capacity** (:class:`Provisionable`): the member's provisioner
  definitions, each a node shape it can add at ``cost_per_hour`` after ``startup`` seconds;
* its **storage classes** (:class:`StorageClassOffer`, from ``GET /v3/storage-classes``),
  each with whether it is usable now (not disabled); unknown for a member that does not say;
* its **prices**, from the member's labels (:data:`PRICE_LABEL`, :data:`EGRESS_PRICE_LABEL`,
  :data:`EGRESS_RATE_LABEL`); a label that is not a non-negative number makes the member
  unhealthy for routing, naming the label;
* when it was asked (``fetched_at``) and, for a member that could not be asked, why.

A node's accelerator model is its annotation ``<device kind>.model``
(``nvidia.com/gpu.model: H100``), set by the node's configuration (``substrate.annotations``)
or a provisioner definition's ``annotations``; a job asks for a model with the same key in
``resource.annotations`` (the Fuzzfile has no model field on ``devices``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.drivers import ClusterOffer

#: The node status whose capacity counts (offline nodes run nothing).
READY = "READY"
#: member label: what an hour of one of its running (free) nodes costs (default 0)
PRICE_LABEL = "price-per-hour"
#: member label: what a GiB leaving the member costs (default 0)
EGRESS_PRICE_LABEL = "egress-price-per-gib"
#: member label: GiB per second data leaves the member at (default :data:`DEFAULT_EGRESS_RATE`)
EGRESS_RATE_LABEL = "egress-gib-per-second"
#: about 1 Gbit/s: the transfer rate assumed for a member that does not say
DEFAULT_EGRESS_RATE = 0.125
#: the status of a storage class whose volumes can be used
STORAGE_CLASS_READY = "STORAGE_CLASS_STATUS_READY"


@dataclass(frozen=True)
class NodeShape:
    """``count`` ready nodes of a member with this total and free capacity and annotations."""

    name: str
    cores: int
    memory: int
    devices: Mapping[str, int] = field(default_factory=dict)
    free_cores: int = 0
    free_memory: int = 0
    free_devices: Mapping[str, int] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    count: int = 1


@dataclass(frozen=True)
class Provisionable:
    """A node shape the member can add: one of its provisioner definitions."""

    id: str
    cores: int
    memory: int
    devices: Mapping[str, int] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    cost_per_hour: float = 0.0
    #: seconds from the request until such a node takes work
    startup: float = 0.0


@dataclass(frozen=True)
class StorageClassOffer:
    """A storage class of a member (``GET /v3/storage-classes``): its name and whether
    volumes of it can be used now (a disabled class's cannot)."""

    name: str
    ready: bool = True


def storage_class_offer(info: Mapping[str, Any]) -> StorageClassOffer:
    """A StorageClassInfoResponse (JSON) as what routing needs of it."""
    status = str(info.get("status") or STORAGE_CLASS_READY)
    return StorageClassOffer(name=str(info.get("name", "")), ready=status == STORAGE_CLASS_READY)


@dataclass(frozen=True)
class MemberOffer(ClusterOffer):
    """A member cluster with its node shapes, provisionable shapes and prices; ``problem``
    says why an unhealthy one is."""

    nodes: tuple[NodeShape, ...] = ()
    problem: str = ""
    provisionable: tuple[Provisionable, ...] = ()
    price_per_hour: float = 0.0
    egress_price_per_gib: float = 0.0
    egress_rate: float = DEFAULT_EGRESS_RATE
    #: when the member answered (``time.time()``; 0: never)
    fetched_at: float = 0.0
    #: what the offer could not learn (definitions unreadable, ...), named in decisions
    notes: tuple[str, ...] = ()
    #: its storage classes by name; None when it could not say (a member serving no
    #: ``/storage-classes``, or whose answer failed): then storage constrains nothing
    storage_classes: Mapping[str, StorageClassOffer] | None = None

    @property
    def ready_nodes(self) -> int:
        """Ready, unheld nodes (every shape's count)."""
        return sum(shape.count for shape in self.nodes)


def _frozen(mapping: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(mapping.items()))


def counts(node: pb.ListNodeInfo) -> bool:
    """Whether a node's capacity counts: READY (or no status) and no hold on it."""
    return (node.status or READY) == READY and not node.holds


def node_shapes(nodes: Iterable[pb.ListNodeInfo]) -> tuple[NodeShape, ...]:
    """The nodes of ``GET /v3/nodes`` that count (:func:`counts`), aggregated by shape."""
    groups: dict[tuple[Any, ...], list[Any]] = {}
    for node in nodes:
        if not counts(node):
            continue
        total, free = node.resource.total, node.resource.free
        key = (
            total.cpu.cores or node.cores,
            total.mem.bytes,
            _frozen({k: v for k, v in total.devices.items() if v}),
            free.cpu.cores,
            free.mem.bytes,
            _frozen({k: v for k, v in free.devices.items() if v}),
            _frozen(node.resource.annotations),
        )
        group = groups.get(key)
        if group is None:
            groups[key] = [node.host_name or node.id, 1]
        else:
            group[1] += 1
    return tuple(
        NodeShape(
            name=name,
            cores=cores,
            memory=memory,
            devices=dict(devices),
            free_cores=free_cores,
            free_memory=free_memory,
            free_devices=dict(free_devices),
            annotations=dict(annotations),
            count=count,
        )
        for (cores, memory, devices, free_cores, free_memory, free_devices, annotations), (
            name,
            count,
        ) in groups.items()
    )


def node_shape(node: pb.ListNodeInfo) -> NodeShape:
    """One node of ``GET /v3/nodes`` (``ListNodeInfo``) as a :class:`NodeShape` of one."""
    total, free = node.resource.total, node.resource.free
    return NodeShape(
        name=node.host_name or node.id,
        cores=total.cpu.cores or node.cores,
        memory=total.mem.bytes,
        devices=dict(total.devices),
        free_cores=free.cpu.cores,
        free_memory=free.mem.bytes,
        free_devices=dict(free.devices),
        annotations=dict(node.resource.annotations),
    )


def provisionable(definition: Mapping[str, Any]) -> Provisionable:
    """A ``ProvisionerDefinition`` of ``GET /v3/provisioner/definitions`` (JSON) as the
    capacity it can add. Its start-up time is ``startupTimeEstimate`` (seconds)."""
    resource = definition.get("resource") or {}
    shape = resource.get("total") or {}
    devices = shape.get("devices") or {}
    return Provisionable(
        id=str(definition.get("id", "")),
        cores=int((shape.get("cpu") or {}).get("cores", 0) or 0),
        memory=int((shape.get("mem") or {}).get("bytes", 0) or 0),
        devices={str(k): int(v) for k, v in devices.items() if int(v)},
        annotations={str(k): str(v) for k, v in (resource.get("annotations") or {}).items()},
        cost_per_hour=float(definition.get("costPerHourEstimate", 0.0) or 0.0),
        startup=float(definition.get("startupTimeEstimate", 0) or 0),
    )


def price_label(labels: Mapping[str, str], label: str, default: float) -> float:
    """A member's price label as a number; ValueError naming the label when it is not one."""
    text = labels.get(label)
    if text is None or text == "":
        return default
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"label {label}: {text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"label {label}: {text!r} is not a non-negative number")
    return value


def member_offer(
    name: str,
    labels: Mapping[str, str],
    nodes: Sequence[pb.ListNodeInfo],
    definitions: Sequence[Mapping[str, Any]] = (),
    *,
    fetched_at: float = 0.0,
    notes: Sequence[str] = (),
    storage_classes: Sequence[Mapping[str, Any]] | None = None,
) -> MemberOffer:
    """The offer of a member that answered, from its ``GET /v3/nodes`` listing, its
    provisioner definitions (JSON, as ``GET /v3/provisioner/definitions`` lists them) and
    its storage classes (JSON, as ``GET /v3/storage-classes`` lists them; None: unknown)."""
    try:
        price = price_label(labels, PRICE_LABEL, 0.0)
        egress_price = price_label(labels, EGRESS_PRICE_LABEL, 0.0)
        egress_rate = price_label(labels, EGRESS_RATE_LABEL, DEFAULT_EGRESS_RATE)
    except ValueError as exc:
        return unreachable_offer(name, labels, str(exc))
    shapes = node_shapes(nodes)
    free_devices: dict[str, int] = {}
    for shape in shapes:
        for kind, count in shape.free_devices.items():
            free_devices[kind] = free_devices.get(kind, 0) + count * shape.count
    return MemberOffer(
        name=name,
        free_cores=sum(s.free_cores * s.count for s in shapes),
        free_memory=sum(s.free_memory * s.count for s in shapes),
        free_devices=free_devices,
        largest_node_cores=max((s.cores for s in shapes), default=0),
        largest_node_memory=max((s.memory for s in shapes), default=0),
        labels=dict(labels),
        healthy=True,
        nodes=shapes,
        provisionable=tuple(provisionable(d) for d in definitions),
        price_per_hour=price,
        egress_price_per_gib=egress_price,
        egress_rate=egress_rate or DEFAULT_EGRESS_RATE,
        fetched_at=fetched_at,
        notes=tuple(notes),
        storage_classes=None
        if storage_classes is None
        else {c.name: c for c in map(storage_class_offer, storage_classes)},
    )


def unreachable_offer(
    name: str, labels: Mapping[str, str], problem: str, *, fetched_at: float = 0.0
) -> MemberOffer:
    """The offer of a member that could not be asked (or priced): unhealthy, with the
    reason."""
    return MemberOffer(
        name=name,
        free_cores=0,
        free_memory=0,
        labels=dict(labels),
        healthy=False,
        problem=problem,
        fetched_at=fetched_at,
    )
