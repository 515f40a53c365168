"""A container's CPU quota and cpuset, from the job and the CPUs Orchestrate pinned it to."""

from __future__ import annotations

import json
from typing import Any

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.substrate.drivers.base import RunRequest
from fuzzball_core.substrate.drivers.steps import cpu_limits

IMAGE = {"uri": "docker://alpine:latest"}


def _request(resource: dict[str, Any] | None, cpus: dict[str, str] | None = None) -> RunRequest:
    job = {"image": IMAGE, "command": ["true"], **({"resource": resource} if resource else {})}
    assignment = node_pb2.Assignment(
        run_id=1,
        workflow_id="wf",
        stage_name="jobs.j",
        job_json=json.dumps(job),
        node_ids=["node-a", "node-b"],
        cpus=cpus or {},
    )
    return RunRequest.from_assignment(assignment, "node-a")


def test_pinned_part_runs_in_its_nodes_cpuset_without_a_quota():
    request = _request(
        {"cpu": {"cores": 2, "affinity": "core"}}, {"node-a": "2-3", "node-b": "0-1"}
    )
    assert cpu_limits(request, 2) == (None, "2-3")


def test_part_on_a_node_the_assignment_names_no_cpus_for_is_unpinned():
    request = _request({"cpu": {"cores": 2}}, {"node-b": "0-1"})
    assert cpu_limits(request, 2) == (2.0, None)


def test_declared_cores_are_a_quota_for_an_unpinned_job():
    assert cpu_limits(_request({"cpu": {"cores": 3}}), 3) == (3.0, None)


def test_job_without_a_cpu_section_runs_unthrottled():
    assert cpu_limits(_request(None), 1) == (None, None)


def test_exclusive_job_owns_the_node_and_is_not_throttled():
    assert cpu_limits(_request({"cpu": {"cores": 1}, "exclusive": True}), 1) == (None, None)
