"""Small builders for scheduler tests: nodes and jobs in people's units (GiB, GPUs)."""

from __future__ import annotations

from fuzzball_core.scheduling import Hold, JobRequest, NodeInfo, Resources
from fuzzball_plugins.schedulers.default import DefaultScheduler

GiB = 1 << 30
GPU = "nvidia.com/gpu"


def node(
    node_id: str,
    cores: int = 16,
    memory_gib: int = 64,
    gpus: int = 0,
    *,
    annotations: dict[str, str] | None = None,
    holds: tuple[Hold, ...] = (),
    ready: bool = True,
    device_plugin_failed: bool = False,
) -> NodeInfo:
    """A node with ``cores`` cores, ``memory_gib`` GiB and ``gpus`` NVIDIA GPUs."""
    return NodeInfo(
        node_id,
        Resources(cores, memory_gib * GiB, {GPU: gpus} if gpus else {}),
        annotations=annotations or {},
        holds=holds,
        ready=ready,
        device_plugin_failed=device_plugin_failed,
    )


def job(
    job_id: str,
    cores: int = 1,
    memory_gib: int = 1,
    gpus: int = 0,
    *,
    nodes: int = 1,
    exclusive: bool = False,
    annotations: dict[str, str] | None = None,
    submitted_at: float = 0.0,
    priority: int = 0,
    runtime: float | None = 3600.0,
) -> JobRequest:
    """A job asking for ``cores``, ``memory_gib`` GiB and ``gpus`` GPUs on each of ``nodes``."""
    return JobRequest(
        job_id,
        Resources(cores, memory_gib * GiB, {GPU: gpus} if gpus else {}),
        nodes=nodes,
        exclusive=exclusive,
        annotations=annotations or {},
        submitted_at=submitted_at,
        priority=priority,
        expected_runtime=runtime,
    )


def cluster(*nodes: NodeInfo) -> DefaultScheduler:
    """A default scheduler with ``nodes`` registered."""
    scheduler = DefaultScheduler()
    for info in nodes:
        scheduler.upsert_node(info)
    return scheduler


def placed_on(result, job_id: str) -> tuple[str, ...] | None:
    """The nodes ``job_id`` was placed on in ``result``, or None."""
    for placement in result.placements:
        if placement.job_id == job_id:
            return placement.node_ids
    return None
