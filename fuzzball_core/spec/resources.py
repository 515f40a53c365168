"""What a job asks of a node, in the scheduler's terms.

Orchestrate places jobs with these figures, Substrate enforces them in the container and Federate
checks them against its members, so they are derived here, once, from the job's definition.
"""

from __future__ import annotations

from fuzzball_core.scheduling import Resources
from fuzzball_core.spec.models import Job, Service

#: Cores a job gets when its definition names none (Fuzzball's default is one core).
DEFAULT_CORES = 1


def job_resources(job: Job | Service) -> Resources:
    """The per-node resources a job asks for."""
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
    return Resources(cores=cores, memory=memory, devices=devices)


def timeout_seconds(job: Job | Service) -> float | None:
    """``policy.timeout.execute`` in seconds, or None."""
    policy = getattr(job, "policy", None)
    if policy is None or policy.timeout is None:
        return None
    return policy.timeout.execute_seconds
