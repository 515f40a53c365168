"""End-to-end benchmark: Orchestrate plus two Substrate agents on this machine.

Prints, from one run:
(a) the upstream hello-world example from submission to FINISHED with its image already in
    the nodes' caches (median of several runs; target < 1 s);
(b) throughput of a 2,000-task array of ``/bin/true`` through the whole system (scheduler,
    node streams, containers, results in the database) with two agents (target >= 100
    jobs/s), in jobs per second from submission to the workflow's FINISHED;
(c) when ``sbatch`` is on PATH, the same 2,000 ``/bin/true`` as a Slurm job array and the
    ratio; otherwise a line saying Slurm was not available.

Orchestrate runs in this process (SQLite in a temporary directory), the agents as child
processes, the image comes from a local ``docker-registry`` (Debian's docker-registry and
busybox-static). Needs root. Usage:
    python bench/e2e.py [--tasks 2000] [--hello-runs 5] [--cores-per-node 32] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tests/support

from support.cluster import HELLO_WORLD, Cluster, LocalRegistry, have_prerequisites

ARRAY = """
version: v1
jobs:
  true:
    image: {{uri: docker://alpine:latest}}
    command: [/bin/true]
    task-array: {{start: 1, end: {tasks}}}
"""


def hello_world_seconds(cluster: Cluster, runs: int) -> float:
    """Median submission-to-FINISHED time of hello-world, image cached on both nodes."""
    orchestrate = cluster.orchestrate
    for _ in range(2):  # warm both nodes' caches and pinned tags
        orchestrate.wait_for(orchestrate.start_workflow(HELLO_WORLD.read_text()))
    samples = []
    for _ in range(runs):
        began = time.perf_counter()
        workflow_id = orchestrate.start_workflow(HELLO_WORLD.read_text())
        view = orchestrate.wait_for(workflow_id)
        samples.append(time.perf_counter() - began)
        assert view.status == "FINISHED", view
    return statistics.median(samples)


def cpu_seconds(pid: int) -> tuple[float, float]:
    """(the process's own CPU seconds, its reaped children's) from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    own = (int(fields[11]) + int(fields[12])) / ticks
    children = (int(fields[13]) + int(fields[14])) / ticks
    return own, children


def thread_cpu_seconds() -> float:
    """CPU seconds of the calling thread."""
    return time.clock_gettime(time.CLOCK_THREAD_CPUTIME_ID)


def array_throughput(cluster: Cluster, tasks: int, profile: bool) -> float:
    """Jobs per second of a ``tasks``-task array of /bin/true, submission to FINISHED.

    Also prints where the CPU went: Orchestrate's loop thread, the agents themselves, and
    the containers (the agents' reaped children).
    """
    orchestrate = cluster.orchestrate
    agents_before = [cpu_seconds(a.process.pid) for a in cluster.agents]
    loop_before = orchestrate.call(thread_cpu_seconds)
    profiler = cProfile.Profile() if profile else None
    if profiler is not None:
        orchestrate.call(profiler.enable)
    began = time.perf_counter()
    workflow_id = orchestrate.start_workflow(ARRAY.format(tasks=tasks), name="throughput")
    view = orchestrate.wait_for(workflow_id, timeout=600)
    elapsed = time.perf_counter() - began
    loop_cpu = orchestrate.call(thread_cpu_seconds) - loop_before
    agents_after = [cpu_seconds(a.process.pid) for a in cluster.agents]
    agent_cpu = sum(a[0] - b[0] for a, b in zip(agents_after, agents_before, strict=True))
    child_cpu = sum(a[1] - b[1] for a, b in zip(agents_after, agents_before, strict=True))
    print(
        f"    CPU over {elapsed:.1f} s wall: Orchestrate loop {loop_cpu:.1f} s "
        f"({loop_cpu / tasks * 1000:.1f} ms/job), agents {agent_cpu:.1f} s "
        f"({agent_cpu / tasks * 1000:.1f} ms/job), containers {child_cpu:.1f} s "
        f"({child_cpu / tasks * 1000:.1f} ms/job)"
    )
    if profiler is not None:
        orchestrate.call(profiler.disable)
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(30)
        print("--- Orchestrate's event-loop thread, cumulative ---")
        print(out.getvalue())
    assert view.status == "FINISHED", view
    return tasks / elapsed


def slurm_throughput(tasks: int) -> float | str:
    """Jobs per second of the same array through Slurm, or why Slurm could not be used."""
    if shutil.which("sbatch") is None:
        return "no sbatch on PATH (../shared/anchors/slurm.sh installs and starts one)"
    began = time.perf_counter()
    done = subprocess.run(
        ["sbatch", "--wait", f"--array=1-{tasks}", "--output=/dev/null", "--wrap=/bin/true"],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return f"sbatch failed ({reason})"
    return tasks / (time.perf_counter() - began)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--hello-runs", type=int, default=5)
    parser.add_argument("--cores-per-node", type=int, default=32)
    parser.add_argument("--metering", choices=["on", "off"], default="on")
    parser.add_argument("--profile", action="store_true", help="profile Orchestrate's loop")
    args = parser.parse_args()
    missing = have_prerequisites()
    if missing is not None:
        sys.exit(f"bench/e2e.py: {missing}")
    with tempfile.TemporaryDirectory(prefix="fuzzball-bench-e2e-") as temporary:
        directory = Path(temporary)
        registry = LocalRegistry(directory / "registry")
        try:
            cluster = Cluster(
                directory,
                registry.url,
                agents=2,
                cores=args.cores_per_node,
                memory="64GiB",
                substrate={"metering": args.metering == "on"},
            )
            try:
                hello = hello_world_seconds(cluster, args.hello_runs)
                print(
                    f"(a) hello-world, image cached: {hello * 1000:.0f} ms "
                    f"(median of {args.hello_runs}; target < 1000 ms)"
                )
                rate = array_throughput(cluster, args.tasks, args.profile)
                print(
                    f"(b) throughput: {rate:.1f} jobs/s ({args.tasks}-task array of /bin/true, "
                    f"one workflow, two agents of {args.cores_per_node} cores, metering "
                    f"{args.metering}; target >= 100 jobs/s)"
                )
            finally:
                cluster.close()
        finally:
            registry.stop()
    slurm = slurm_throughput(args.tasks)
    if isinstance(slurm, str):
        print(f"(c) Slurm: not available: {slurm}")
    else:
        print(
            f"(c) Slurm: {slurm:.1f} jobs/s for the same array; Fuzzball/Slurm = {rate / slurm:.2f}"
        )


if __name__ == "__main__":
    main()
