"""Provisioning benchmark: what on-demand nodes cost.

1. **Submission to running on a fresh node**: Orchestrate (in this process) with no node and
   one ``local`` provisioner definition; a workflow is submitted and timed until its job is
   RUNNING on the node provisioned for it (a new Substrate process, registered with its
   one-time token), and until it FINISHED. Repeated ``--runs`` times, each with a fresh
   Orchestrate. Needs root, Debian's docker-registry and the node runtime (as the e2e tests).
2. **The loop's decision cost**: ``Provisioning.scale_up`` over ``--definitions`` definitions
   (varied shapes and costs, room for every job) and ``--jobs`` waiting jobs, with a driver
   that records its launches and starts nothing; then a round in which every job is already
   covered (the steady state of a long queue). Median of ``--repeat`` rounds. The peer, in
   the same run: the default scheduler's pass placing the same jobs on one node of each
   definition's shape, the decision the engine makes for them every pass.

Usage: python bench/provision.py [--runs 3] [--definitions 50] [--jobs 1000] [--repeat 5]
       [--skip-e2e]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path.insert(0, str(TESTS))  # tests/support

from support.cluster import (  # noqa: E402
    InProcessOrchestrate,
    LocalRegistry,
    cluster_config,
    free_port,
    have_prerequisites,
)
from support.scripted_provisioner import ScriptedProvisioner  # noqa: E402

from fuzzball_core.config import ProvisionerConfig  # noqa: E402
from fuzzball_core.orchestrate.provisioning import Provisioning  # noqa: E402
from fuzzball_core.scheduling import JobRequest, NodeInfo, Resources  # noqa: E402
from fuzzball_core.vocabulary import InstanceState  # noqa: E402
from fuzzball_plugins.schedulers.default import DefaultScheduler  # noqa: E402

GIB = 1024**3
JOB = """\
version: v1
jobs:
  hello:
    image: {uri: docker://alpine:latest}
    command: [/bin/sh, -c, "sleep 1"]
    resource: {cpu: {cores: 2}, memory: {size: 256MiB}}
"""


def fresh_node_run(directory: Path, registry: LocalRegistry) -> tuple[float, float]:
    """Seconds from submission to RUNNING and to FINISHED, on a freshly provisioned node."""
    config: dict[str, Any] = cluster_config(directory, registry.url, grpc_port=free_port())
    base = directory / "node-base.yaml"
    base.write_text(yaml.safe_dump({"images": config["images"], "tls": config["tls"]}))
    config["provisioner"] = {
        "definitions": [
            {
                "id": "bench",
                "driver": "local",
                "cores": 4,
                "memory": "2GiB",
                "idle-timeout": 1,
                "config": {"state-dir": str(directory / "instances"), "base-config": str(base)},
            }
        ]
    }
    orchestrate = InProcessOrchestrate(config)
    try:
        submitted = time.time()
        workflow = orchestrate.start_workflow(JOB)
        view = orchestrate.wait_for(workflow, timeout=180)
        (job,) = [stage for stage in view.stages if stage.name == "jobs.hello"]
        assert job.started_at is not None and view.finished_at is not None, view
        running, finished = job.started_at - submitted, view.finished_at - submitted
        provisioning = orchestrate.orchestrate.engine.context.provisioning
        deadline = time.monotonic() + 60
        while any(r.state is not InstanceState.DELETED for r in provisioning.records()):
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
        return running, finished
    finally:
        orchestrate.close()


def decision_cost(definitions: int, jobs: int, repeat: int) -> tuple[float, float, float]:
    """Median seconds of a scale-up over ``jobs`` new waiting jobs, of one where every job
    is already covered by a requested instance, and of the default scheduler's pass over
    the same jobs on one node of each definition's shape (the peer)."""
    config = ProvisionerConfig.model_validate(
        {
            "definitions": [
                {
                    "id": f"d{n}",
                    "driver": "scripted",
                    "cores": 2 + n % 16,
                    "memory": (1 + n % 8) * GIB,
                    "cost-per-hour-estimate": (n * 7919) % 100 / 10,
                    "max-nodes": jobs,
                }
                for n in range(definitions)
            ],
        }
    )
    waiting = [
        JobRequest(f"run-{i}", Resources(1 + i % 12, (1 + i % 6) * GIB), submitted_at=float(i))
        for i in range(jobs)
    ]
    first, steady, scheduled = [], [], []
    for _ in range(repeat):
        scheduler = DefaultScheduler()
        for definition in config.definitions:
            scheduler.upsert_node(
                NodeInfo(definition.id, Resources(definition.cores, definition.memory))
            )
        started = time.perf_counter()
        scheduler.schedule(waiting, now=0.0)
        scheduled.append(time.perf_counter() - started)
        provisioning = Provisioning(
            config, {"scripted": ScriptedProvisioner()}, node_address="127.0.0.1:1"
        )
        started = time.perf_counter()
        provisioning.scale_up(waiting)
        first.append(time.perf_counter() - started)
        started = time.perf_counter()
        provisioning.scale_up(waiting)
        steady.append(time.perf_counter() - started)
    return statistics.median(first), statistics.median(steady), statistics.median(scheduled)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--definitions", type=int, default=50)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--skip-e2e", action="store_true")
    options = parser.parse_args()

    first, steady, scheduled = decision_cost(options.definitions, options.jobs, options.repeat)
    print(
        f"scale-up decision, {options.definitions} definitions x {options.jobs} waiting jobs:"
        f" {first * 1000:.1f} ms requesting (incl. user data for each instance),"
        f" {steady * 1000:.1f} ms when all are already requested; peer: the default"
        f" scheduler's pass over the same jobs on {options.definitions} nodes of those"
        f" shapes, {scheduled * 1000:.1f} ms"
    )
    if options.skip_e2e:
        return
    missing = have_prerequisites()
    if missing is not None:
        print(f"submission to running on a fresh local node: skipped ({missing})")
        return
    with tempfile.TemporaryDirectory(prefix="fb-provision-bench-") as scratch:
        registry = LocalRegistry(Path(scratch) / "registry")
        try:
            times = []
            for run in range(options.runs):
                directory = Path(scratch) / f"run-{run}"
                directory.mkdir()
                times.append(fresh_node_run(directory, registry))
                print(
                    f"run {run + 1}: running after {times[-1][0]:.2f} s,"
                    f" finished after {times[-1][1]:.2f} s"
                )
        finally:
            registry.stop()
    print(
        "submission to running on a fresh local node: median"
        f" {statistics.median(t[0] for t in times):.2f} s"
        f" (finished {statistics.median(t[1] for t in times):.2f} s), {options.runs} runs"
    )


if __name__ == "__main__":
    main()
