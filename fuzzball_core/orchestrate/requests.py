"""From a job's definition to what the scheduler and the node need.

A stage's job (defaults applied) becomes a :class:`JobRequest` for the scheduler and, once
placed, an assignment payload for the node. Both are derived from the stored v4 definition,
so the engine can rebuild them after a restart.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from fuzzball_core.orchestrate.capabilities import VOLUME_FILE_SCHEME
from fuzzball_core.scheduling import DomainPolicy, JobRequest
from fuzzball_core.spec import Job, Service
from fuzzball_core.spec.models import Policy, Volume
from fuzzball_core.spec.references import step_file_contents
from fuzzball_core.spec.resources import cpu_pinning, host_ports, job_resources, timeout_seconds


def run_key(run_id: int) -> str:
    """The scheduler's id for a run."""
    return f"run-{run_id}"


def job_request(
    run_id: int, job: Job | Service, *, submitted_at: float, account: str = ""
) -> JobRequest:
    """The scheduler's view of one run of ``job`` (a job's or a service's), submitted by
    ``account`` (its id: what fair share orders by). Accounts have no organization yet (the
    identity issue), so the request's organization is empty. A multinode job is kept inside
    one NVLink domain as ``multinode.nvlink-domain`` says (by default it prefers one)."""
    resource = job.resource
    multinode = job.multinode
    return JobRequest(
        id=run_key(run_id),
        resources=job_resources(job),
        nodes=job.multinode.nodes if job.multinode is not None else 1,
        exclusive=bool(resource is not None and resource.exclusive),
        annotations=dict((resource.annotations if resource is not None else None) or {}),
        submitted_at=submitted_at,
        expected_runtime=timeout_seconds(job),
        cpu=cpu_pinning(job),
        host_ports=host_ports(job),
        account=account,
        domain=DomainPolicy(multinode.nvlink_domain or DomainPolicy.PREFER) if multinode else None,
    )


def volume_ingress_json(job: Job | Service, volumes: Mapping[str, Volume] | None) -> str:
    """What the node fetches into the job's mounted volumes before it starts (the
    assignment's ``volume_ingress_json``); empty when none of them has an ingress."""
    wanted: dict[str, list[dict[str, str | int]]] = {}
    for mount in (job.mounts or {}).values():
        volume = (volumes or {}).get(mount.volume)
        if volume is not None and volume.ingress:
            wanted[mount.volume] = [
                {
                    "source": transfer.source.uri,
                    "destination": transfer.destination.uri.removeprefix(VOLUME_FILE_SCHEME),
                    # the reference only: its credentials reach the node when the run starts
                    **({"secret": transfer.source.secret} if transfer.source.secret else {}),
                    **_retries(transfer.policy),
                }
                for transfer in volume.ingress
            ]
    return json.dumps(wanted, separators=(",", ":")) if wanted else ""


def _retries(policy: Policy | None) -> dict[str, int]:
    """A transfer's ``retries`` (policy.retry.attempts: reruns after the first try, as for
    a job) when it has some."""
    retry = policy.retry if policy is not None else None
    if retry is None or not retry.attempts:
        return {}
    return {"retries": retry.attempts}


def job_payload(job: Job, workflow_files: Mapping[str, str] | None = None) -> str:
    """The job's definition as the JSON the node receives.

    The node never sees the workflow's top-level ``files``: each of the job's ``files``
    entries (``/path: file://NAME``, checked at submission, or the content inline) arrives
    as ``/path: CONTENT``."""
    data: dict[str, Any] = job.model_dump(mode="json", by_alias=True, exclude_none=True)
    if job.files:
        data["files"] = step_file_contents(job.files, workflow_files)
    return json.dumps(data, separators=(",", ":"))
