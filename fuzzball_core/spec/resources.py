"""What a job asks of a node, in the scheduler's terms.

Orchestrate places jobs with these figures, Substrate enforces them in the container and Federate
checks them against its members, so they are derived here, once, from the job's definition.
"""

from __future__ import annotations

from fuzzball_core.scheduling import CpuAffinity, CpuPinning, Resources
from fuzzball_core.spec.models import Job, JobNetwork, Service

#: Cores a job gets when its definition names none (Fuzzball's default is one core).
DEFAULT_CORES = 1
#: A job asks for IMEX channels (which let the GPUs of a multi-node NVLink domain share
#: memory) by naming them in this variable of its ``env``, as NVIDIA's container toolkit
#: reads it: one channel of the resource below per comma-separated id.
IMEX_ENV = "NVIDIA_IMEX_CHANNELS"
IMEX_CHANNEL = "nvidia.com/imex-channel"


def imex_channel_ids(job: Job | Service) -> list[str] | None:
    """The channel ids ``NVIDIA_IMEX_CHANNELS`` in ``job``'s env names (its last setting
    wins, as in the container), or None when it is not set."""
    value = None
    for entry in job.env or ():
        name, _, text = str(entry).partition("=")
        if name == IMEX_ENV:
            value = text
    if value is None:
        return None
    return [part.strip() for part in value.split(",") if part.strip()]


def job_resources(job: Job | Service) -> Resources:
    """The per-node resources a job asks for: its ``resource``, and the IMEX channels its
    ``NVIDIA_IMEX_CHANNELS`` names unless ``resource.devices`` counts them itself."""
    resource = job.resource
    cores = DEFAULT_CORES
    memory = 0
    devices: dict[str, int] = {}
    if resource is not None:
        if resource.cpu is not None and resource.cpu.cores is not None:
            cores = resource.cpu.cores
        if resource.memory is not None and resource.memory.size_bytes is not None:
            memory = resource.memory.size_bytes
            if resource.memory.by_core:
                memory *= cores
        devices = dict(resource.devices or {})
    channels = imex_channel_ids(job)
    if channels and IMEX_CHANNEL not in devices:
        devices[IMEX_CHANNEL] = len(channels)
    return Resources(cores=cores, memory=memory, devices=devices)


def cpu_pinning(job: Job | Service) -> CpuPinning | None:
    """The CPU layout a job asks for (``resource.cpu``: ``affinity``, ``sockets``,
    ``threads``), or None when it sets none of them and may run on any of the node's cores."""
    resource = job.resource
    cpu = resource.cpu if resource is not None else None
    if cpu is None or (cpu.affinity is None and cpu.sockets is None and cpu.threads is None):
        return None
    return CpuPinning(
        affinity=CpuAffinity(cpu.affinity.lower()) if cpu.affinity is not None else None,
        sockets=cpu.sockets,
        threads=bool(cpu.threads),
    )


def host_ports(job: Job | Service) -> frozenset[str]:
    """The ports a job or service takes on its node (``tcp/8080``): a job's ``expose-tcp``
    and ``expose-udp`` (forwarded from the node), a service's ``network.ports`` (services
    serve on the node's network). No two of them can share a node."""
    network = job.network
    if network is None:
        return frozenset()
    if isinstance(network, JobNetwork):
        return frozenset(
            [f"tcp/{port}" for port in network.expose_tcp or ()]
            + [f"udp/{port}" for port in network.expose_udp or ()]
        )
    return frozenset(f"{port.protocol or 'tcp'}/{port.port}" for port in network.ports or ())


def timeout_seconds(job: Job | Service) -> float | None:
    """``policy.timeout.execute`` in seconds, or None."""
    policy = getattr(job, "policy", None)
    if policy is None or policy.timeout is None:
        return None
    return policy.timeout.execute_seconds
