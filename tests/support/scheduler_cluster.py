"""Small builders for scheduler tests: nodes and jobs in people's units (GiB, GPUs)."""

from __future__ import annotations

from fuzzball_core.scheduling import CpuCore, CpuPinning, Hold, JobRequest, NodeInfo, Resources
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
    cpu_topology: tuple[CpuCore, ...] = (),
) -> NodeInfo:
    """A node with ``cores`` cores, ``memory_gib`` GiB and ``gpus`` NVIDIA GPUs."""
    return NodeInfo(
        node_id,
        Resources(cores, memory_gib * GiB, {GPU: gpus} if gpus else {}),
        annotations=annotations or {},
        holds=holds,
        ready=ready,
        device_plugin_failed=device_plugin_failed,
        cpu_topology=cpu_topology,
    )


def topology(sockets: int = 1, numa_per_socket: int = 1, cores_per_numa: int = 4, threads=1):
    """Cores numbered socket by socket, NUMA node by NUMA node; core ``c``'s logical CPUs are
    ``c`` and, with more threads, ``c + n``, ``c + 2n``... for ``n`` cores (Linux's usual
    numbering of hyperthread siblings)."""
    count = sockets * numa_per_socket * cores_per_numa
    return tuple(
        CpuCore(
            core,
            socket=core // (numa_per_socket * cores_per_numa),
            numa=core // cores_per_numa,
            threads=tuple(core + thread * count for thread in range(threads)),
        )
        for core in range(count)
    )


def pinned_node(node_id: str, layout: tuple[CpuCore, ...], **kwargs) -> NodeInfo:
    """A node whose count of cores is its topology's logical CPUs."""
    cpus = sum(len(core.threads) for core in layout)
    return node(node_id, cores=cpus, cpu_topology=layout, **kwargs)


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
    cpu: CpuPinning | None = None,
    host_ports: frozenset[str] = frozenset(),
    account: str = "",
    organization: str = "",
) -> JobRequest:
    """A job asking for ``cores``, ``memory_gib`` GiB and ``gpus`` GPUs on each of ``nodes``,
    submitted by ``account`` of ``organization``."""
    return JobRequest(
        job_id,
        Resources(cores, memory_gib * GiB, {GPU: gpus} if gpus else {}),
        nodes=nodes,
        exclusive=exclusive,
        annotations=annotations or {},
        submitted_at=submitted_at,
        priority=priority,
        expected_runtime=runtime,
        cpu=cpu,
        host_ports=host_ports,
        account=account,
        organization=organization,
    )


def cluster(*nodes: NodeInfo, options: dict | None = None) -> DefaultScheduler:
    """A default scheduler configured with ``options``, with ``nodes`` registered."""
    scheduler = DefaultScheduler(options)
    for info in nodes:
        scheduler.upsert_node(info)
    return scheduler


def placed_on(result, job_id: str) -> tuple[str, ...] | None:
    """The nodes ``job_id`` was placed on in ``result``, or None."""
    for placement in result.placements:
        if placement.job_id == job_id:
            return placement.node_ids
    return None


def cpus_of(result, job_id: str, node_id: str) -> tuple[int, ...] | None:
    """The logical CPUs ``job_id`` was pinned to on ``node_id`` in ``result``, or None."""
    for placement in result.placements:
        if placement.job_id == job_id:
            return placement.cpus.get(node_id)
    return None
