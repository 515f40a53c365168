"""Benchmark: parse + validate + plan a generated 5,000-job workflow.

The workflow has chains (each job after the one before), fan-outs (one job feeding 20),
on-failure cleanups, defaults, a volume, a workflow-built image and a job with a
100,000-task array. Prints one line per figure; the target is under 1 s for the whole.
Run: ``python bench/spec.py [JOBS]``.
"""

from __future__ import annotations

import sys
import time

from fuzzball_core.spec import parse_workflow, plan_workflow
from fuzzball_core.spec.upgrade import dump_yaml


def generate_workflow(job_count: int) -> str:
    """Return v4 YAML text for a workflow of ``job_count`` jobs."""
    jobs: dict[str, dict] = {}
    for index in range(job_count):
        job: dict = {
            "image": {"uri": "docker://alpine:3.19" if index % 7 else "fuzzball://user/tools.sif"},
            "command": ["/bin/sh", "-c", f"echo step {index}"],
            "resource": {"cpu": {"cores": 1 + index % 4}, "memory": {"size": "1GiB"}},
        }
        if index % 100 == 0:
            pass  # the head of a chain
        elif index % 100 < 20:  # fan-out: 19 jobs all after the chain head
            job["depends-on"] = [{"name": f"job-{index - index % 100}", "status": "FINISHED"}]
        elif index % 100 == 20:  # fan-in: after the whole fan
            job["depends-on"] = [
                {"name": f"job-{index - 20 + k}", "status": "FINISHED"} for k in range(1, 20)
            ]
        elif index % 50 == 49:  # a cleanup that runs only when the previous job fails
            job["depends-on"] = [{"name": f"job-{index - 1}", "status": "FAILED"}]
        else:  # chain
            job["depends-on"] = [{"name": f"job-{index - 1}", "status": "FINISHED"}]
        if index == 1:
            job["task-array"] = {"start": 1, "end": 100_000, "concurrency": 200}
            job["policy"] = {"retry": {"on": ["node", 75], "attempts": 3}}
        jobs[f"job-{index}"] = job
    workflow = {
        "version": "v4",
        "defaults": {
            "job": {
                "env": ["LANG=C.UTF-8"],
                "mounts": {"/data": {"volume": "data"}},
                "policy": {"timeout": {"execute": "1h30m"}},
            }
        },
        "volumes": {"data": {"reference": "volume://user/ephemeral"}},
        "images": {
            "tools.sif": {
                "from": {"uri": "docker://rockylinux/rockylinux:9"},
                "post": "dnf install -y jq\n",
            }
        },
        "jobs": jobs,
    }
    return dump_yaml(workflow)


def main() -> None:
    job_count = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    text = generate_workflow(job_count).encode()
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        parsed = parse_workflow(text, source="bench.yaml")
        plan = plan_workflow(parsed)
        order = plan.topological_order()
        elapsed = time.perf_counter() - started
        best = min(best, elapsed)
    assert len(order) == job_count + 2
    tasks = sum(len(stage.tasks) for stage in plan if stage.tasks is not None)
    print(
        f"file: {len(text) / 1e6:.1f} MB, {len(plan)} stages, {len(plan.edges)} edges, "
        f"{tasks} tasks"
    )
    print(f"spec parse+validate+plan {job_count} jobs: {best:.2f} s (best of 3)")
    started = time.perf_counter()
    plan.advance(set(), set(), set())
    print(f"spec advance over {len(plan)} stages: {time.perf_counter() - started:.3f} s")


if __name__ == "__main__":
    main()
