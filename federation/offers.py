"""What Federate knows of a member cluster when it routes: its nodes' shapes and its health.

A :class:`MemberOffer` is a :class:`~fuzzball_core.drivers.ClusterOffer` that also carries
every ready node's capacity and annotations (so a router can tell whether one node holds a
job, not only whether the cluster as a whole has room) and, for a member that could not be
asked, why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.drivers import ClusterOffer

#: The node status whose capacity counts (offline nodes run nothing).
READY = "READY"


@dataclass(frozen=True)
class NodeShape:
    """One ready node of a member: total and free capacity, and its annotations."""

    name: str
    cores: int
    memory: int
    devices: Mapping[str, int] = field(default_factory=dict)
    free_cores: int = 0
    free_memory: int = 0
    free_devices: Mapping[str, int] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class MemberOffer(ClusterOffer):
    """A member cluster with its node shapes; ``problem`` says why an unhealthy one is."""

    nodes: tuple[NodeShape, ...] = ()
    problem: str = ""


def node_shape(node: pb.ListNodeInfo) -> NodeShape:
    """A node of ``GET /v3/nodes`` (``ListNodeInfo``) as a :class:`NodeShape`."""
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


def member_offer(
    name: str, labels: Mapping[str, str], nodes: Sequence[pb.ListNodeInfo]
) -> MemberOffer:
    """The offer of a member that answered, from its ``GET /v3/nodes`` listing."""
    shapes = tuple(node_shape(n) for n in nodes if (n.status or READY) == READY)
    free_devices: dict[str, int] = {}
    for shape in shapes:
        for kind, count in shape.free_devices.items():
            free_devices[kind] = free_devices.get(kind, 0) + count
    return MemberOffer(
        name=name,
        free_cores=sum(s.free_cores for s in shapes),
        free_memory=sum(s.free_memory for s in shapes),
        free_devices=free_devices,
        largest_node_cores=max((s.cores for s in shapes), default=0),
        largest_node_memory=max((s.memory for s in shapes), default=0),
        labels=dict(labels),
        healthy=True,
        nodes=shapes,
    )


def unreachable_offer(name: str, labels: Mapping[str, str], problem: str) -> MemberOffer:
    """The offer of a member that could not be asked: unhealthy, with the reason."""
    return MemberOffer(
        name=name,
        free_cores=0,
        free_memory=0,
        labels=dict(labels),
        healthy=False,
        problem=problem,
    )
