"""Substrate's task drivers: one small driver per kind of work a node is assigned.

============================  =====================================================
driver                        runs
============================  =====================================================
:class:`ContainerJobDriver`   a job's container (``jobs.NAME``)
:class:`ServiceDriver`        a service's container, probed for readiness
:class:`MultinodePartDriver`  this node's ranks of a multinode job or service
:class:`ImagePullDriver`      an image stage's pull (and its write-back)
:class:`ImageBuildDriver`     an image stage's build (``post`` script, seal, store)
:class:`VolumeEgressDriver`   a volume's egress (``volumes.NAME.egress``)
============================  =====================================================

Every driver implements :class:`TaskDriver` (start, wait, stop, signal, destroy, stats);
:func:`driver_for` is the one place that picks the driver of an assignment.
"""

from __future__ import annotations

from fuzzball_core.spec.models import Service
from fuzzball_core.substrate.drivers.base import (
    BUILD,
    EGRESS,
    PULL,
    LogSink,
    NodeServices,
    RunOutcome,
    RunRequest,
    StopReason,
    TaskDriver,
)
from fuzzball_core.substrate.drivers.container_job import (
    ContainerJobDriver,
    MultinodePartDriver,
    ServiceDriver,
)
from fuzzball_core.substrate.drivers.image_build import ImageBuildDriver
from fuzzball_core.substrate.drivers.image_pull import ImagePullDriver
from fuzzball_core.substrate.drivers.steps import (
    container_hostname,
    job_command,
    job_environment,
)
from fuzzball_core.substrate.drivers.volume_egress import VolumeEgressDriver
from fuzzball_core.substrate.pmi import Fence
from fuzzball_core.substrate.ranks import RankLayout

__all__ = [
    "BUILD",
    "EGRESS",
    "PULL",
    "ContainerJobDriver",
    "ImageBuildDriver",
    "ImagePullDriver",
    "LogSink",
    "MultinodePartDriver",
    "NodeServices",
    "RunOutcome",
    "RunRequest",
    "ServiceDriver",
    "StopReason",
    "TaskDriver",
    "VolumeEgressDriver",
    "container_hostname",
    "driver_for",
    "job_command",
    "job_environment",
]


def driver_for(
    request: RunRequest,
    node: NodeServices,
    sink: LogSink,
    *,
    node_id: str = "",
    fence: Fence | None = None,
) -> TaskDriver:
    """The driver of ``request``, by the kind of its work.

    ``node_id`` places this node among a multinode run's nodes; ``fence`` is the barrier its
    ranks' PMI service crosses with the other nodes' (Orchestrate's; a run with no other
    node to wait for passes it at once).
    """
    if request.image_work == PULL:
        return ImagePullDriver(request, node, sink)
    if request.image_work == BUILD:
        return ImageBuildDriver(request, node, sink)
    if request.image_work == EGRESS:
        return VolumeEgressDriver(request, node, sink)
    job = request.job
    assert job is not None, f"unknown image payload kind {request.image_work!r}"
    ranks = RankLayout.of(job, request.node_ids, node_id)
    if ranks is not None:
        return MultinodePartDriver(request, node, sink, ranks=ranks, fence=fence or _no_other_nodes)
    if isinstance(job, Service):
        return ServiceDriver(request, node, sink)
    return ContainerJobDriver(request, node, sink)


async def _no_other_nodes(seq: int, kvs: dict[str, str]) -> dict[str, str]:
    """The barrier of a run with no Orchestrate to span (one node, or a test)."""
    return {}
