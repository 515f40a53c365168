"""The node agent's own CPU per job, without Orchestrate: bench/e2e.py's array on one node.

Runs ``--tasks`` assignments of one ``/bin/true`` array stage through the path the agent
takes for each (``RunRequest.from_assignment``, ``driver_for``, the driver's ``start`` and
``wait``, the ``RunExited`` message, ``destroy``), ``--concurrency`` at a time on one event
loop, as the agent's loop runs them, with the node's real image cache, runtime and mount
holds. With ``--separate`` each job is instead the one job of a workflow of its own, all of
one owner (``--owner``; empty: assignments without one, as an older Orchestrate sends, whose
kept cgroups go only to the same workflow's jobs). Prints the CPU per job of this process
(its loop, its container-start threads: the agent's share) and of its reaped children (the
containers), and the loop thread's alone.
No gRPC stream, no Orchestrate: the figure is the part of the agent's CPU that its drivers
spend, which the load of other processes inflates far less than bench/e2e.py's whole
system. To compare two trees, run it alternately with each on PYTHONPATH, e.g.
    for i in 1 2 3; do for t in /tmp/old /work/main; do
        PYTHONPATH=$t python bench/agent_jobs.py --label $t; done; done
Needs root (containers) and Debian's docker-registry and busybox-static (the image).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tests/support

from support.cluster import LocalRegistry, have_prerequisites

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.plugins import get_registry
from fuzzball_core.substrate.devices import DevicePool
from fuzzball_core.substrate.drivers import NodeServices, RunRequest, driver_for
from fuzzball_core.substrate.images import NodeImages
from fuzzball_core.substrate.mount_holds import ImageMountHolds
from fuzzball_core.substrate.volumes import WorkflowVolumes
from fuzzball_runtime import release_kept_cgroups, sweep

JOB = {"image": {"uri": "docker://alpine:latest"}, "command": ["/bin/true"]}


def node_services(directory: Path, registry_url: str) -> NodeServices:
    """A node's services as the agent builds them (same pools, mount holds on)."""
    plugins = get_registry()
    threads = max(4, min(16, 4 * (os.cpu_count() or 1)))
    return NodeServices(
        images=NodeImages(
            plugins,
            {"registries": {"docker.io": {"mirrors": [registry_url]}}},
            directory / "cache",
        ),
        volumes=WorkflowVolumes(directory / "work"),
        devices=DevicePool([], {}),
        hooks=plugins.hook,
        state_dir=directory / "runtime",
        runs_dir=directory / "runs",
        start_pool=ThreadPoolExecutor(threads, thread_name_prefix="container"),
        pull_pool=ThreadPoolExecutor(4, thread_name_prefix="image-pull"),
        mount_holds=ImageMountHolds(directory / "runtime"),
    )


@dataclass(frozen=True)
class Workload:
    """What the assignments look like: one array's tasks or separate workflows' jobs."""

    job_json: str
    #: each job its own workflow's (else all tasks of workflow ``wf``)
    separate: bool = False
    #: the workflows' owner as Orchestrate names it ("": none, as an older Orchestrate)
    owner: str = ""


async def one_job(node: NodeServices, task_id: int, work: Workload) -> None:
    """One task (or separate workflow's job), as ``Agent._assign`` and ``Agent._execute``
    run it."""
    assignment = node_pb2.Assignment(
        run_id=task_id,
        workflow_id=f"wf-{task_id}" if work.separate else "wf",
        stage_name="jobs.true",
        job_json=work.job_json,
        task_id=0 if work.separate else task_id,
        has_task=not work.separate,
        # as Orchestrate sends a job needing no secret: with its workflow's token
        workflow_token="bench-workflow-token",
        owner=work.owner,
    )
    request = RunRequest.from_assignment(assignment, "node")
    execution = driver_for(request, node, lambda _run, _stream, _data: None)
    try:
        outcome = await execution.start()
        if outcome is None:
            outcome = await execution.wait()
    finally:
        execution.destroy()
    node_pb2.NodeMessage(exited=outcome.to_message(request.run_id))
    if outcome.exit_code != 0:
        raise AssertionError(f"task {task_id}: {outcome}")


async def run_tasks(
    node: NodeServices, tasks: int, concurrency: int, first: int, work: Workload
) -> None:
    """``tasks`` tasks, at most ``concurrency`` at once."""
    slots = asyncio.Semaphore(concurrency)

    async def slot(task_id: int) -> None:
        async with slots:
            await one_job(node, task_id, work)

    await asyncio.gather(*(slot(first + index) for index in range(tasks)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--label", default="", help="printed before the figures")
    parser.add_argument(
        "--separate", action="store_true", help="each job the one job of its own workflow"
    )
    parser.add_argument(
        "--owner",
        default="bench-account/bench-user",
        help="the workflows' owner in the assignments ('': none, as an older Orchestrate)",
    )
    args = parser.parse_args()
    work = Workload(json.dumps(JOB), separate=args.separate, owner=args.owner)
    missing = have_prerequisites()
    if missing is not None:
        sys.exit(f"bench/agent_jobs.py: {missing}")
    with tempfile.TemporaryDirectory(prefix="fuzzball-bench-agent-jobs-") as temporary:
        directory = Path(temporary)
        registry = LocalRegistry(directory / "registry")
        node = node_services(directory, registry.url)
        try:
            # warm: the image pulled, converted, pinned and its mount held
            asyncio.run(run_tasks(node, 8, 8, 0, work))
            before = os.times()
            began = time.perf_counter()

            async def measured() -> float:
                start = time.thread_time()
                await run_tasks(node, args.tasks, args.concurrency, 1000, work)
                return time.thread_time() - start

            loop_cpu = asyncio.run(measured())
            elapsed = time.perf_counter() - began
            after = os.times()
        finally:
            node.start_pool.shutdown()
            node.pull_pool.shutdown()
            if node.mount_holds is not None:
                node.mount_holds.release_all()
            release_kept_cgroups()
            sweep(node.state_dir)
            registry.stop()
    own = after.user + after.system - before.user - before.system
    children = (
        after.children_user + after.children_system - before.children_user - before.children_system
    )
    per_job = 1000 / args.tasks
    print(
        f"{args.label} {args.tasks} jobs in {elapsed:.1f} s: CPU per job: agent "
        f"{own * per_job:.3f} ms (its loop {loop_cpu * per_job:.3f} ms), containers "
        f"{children * per_job:.3f} ms; load {os.getloadavg()[0]:.1f}",
        flush=True,
    )


if __name__ == "__main__":
    main()
