"""Hollow nodes (like kubemark): Orchestrate on PostgreSQL with 500 to 5,000 simulated nodes.

The nodes (tests/support/hollow.py) speak the real node API over gRPC from a few child
processes: register, hold a Connect stream, heartbeat at the interval Orchestrate's Welcome
names (lease/3 on a small cluster, longer on a large one), and report every run they are
given as started, one log line and exit 0 at once (zero-length jobs; no containers). At
each size the benchmark prints:

* lease traffic: Orchestrate's CPU (/proc/PID/stat) over ``--window`` seconds with every
  node connected and idle, as a share of one core, next to the same process with no nodes
  (target at 5,000 nodes: <= 10 %), and the heartbeats the nodes sent per second;
* zero-length jobs: a ``--tasks`` task array from submission to FINISHED, in jobs per
  second (target >= 1,000), and Orchestrate's CPU per job;
* ``workflow list`` and ``node list`` (GET /v3/workflows, /v3/nodes) p99 and median while the
  array runs, one every 0.5 s each, as a few users' CLIs and UIs would (target < 100 ms p99),
  with each list's first GET and its five slowest;
  ``--tasks 0`` measures lease traffic only.

The peer: kubemark's published 5,000-node run is the scale target; no peer runs here, so
the idle process is the baseline printed beside each figure. Needs root, Debian's
postgresql and docker-registry. Usage:
    python bench/hollow.py [--sizes 500,1000,2000,5000] [--tasks 5000] [--lease 15]
        [--window 60] [--pass-budget SECONDS] [--profile DIR [--profile-gil]]
        [--keepalive INTERVAL,TIMEOUT] [--per-channel N]
"""

from __future__ import annotations

import argparse
import os
import threading
import time

from hollow_cluster import (
    KEEPALIVE_HELP,
    HollowCluster,
    keepalive_option,
    median,
    p99,
    rss_bytes,
    spy,
    unspy,
)
from support.hollow import NODES_PER_CHANNEL

#: seconds between two GETs of each list while the array runs (a few users' CLIs and UIs)
PROBE_GAP = 0.5


def lease_cpu(cluster: HollowCluster, window: float) -> tuple[float, float]:
    """Orchestrate's CPU over ``window`` seconds, as a fraction of one core, and the
    heartbeats the nodes sent per second meanwhile."""
    before, beats = cluster.cpu(), cluster.stats().heartbeats
    time.sleep(window)
    sent = cluster.stats().heartbeats - beats
    return (cluster.cpu() - before) / window, sent / window


def zero_length_jobs(
    cluster: HollowCluster, tasks: int
) -> tuple[float, float, list[float], list[float]]:
    """(jobs/s, Orchestrate CPU ms per job, workflow-list latencies, node-list latencies)
    of one ``tasks``-task array of zero-length jobs; prints the hollow fleets' CPU per job
    beside it (they share the cores with Orchestrate)."""
    from hollow_cluster import ARRAY

    #: each list's GETs: (when it was sent, seconds it took)
    gets: dict[str, list[tuple[float, float]]] = {"/workflows": [], "/nodes": []}
    done = threading.Event()

    def probe(path: str) -> None:
        while not done.is_set():
            sent = time.perf_counter()
            gets[path].append((sent, cluster.timed_get(path)))
            time.sleep(PROBE_GAP)

    probes = [threading.Thread(target=probe, args=(path,)) for path in gets]
    cpu_before, fleet_before = cluster.cpu(), cluster.fleet_cpu()
    database_before = cluster.database_cpu()
    passes_before, pass_seconds_before = cluster.engine_passes()
    began = time.perf_counter()
    workflow_id = cluster.submit(ARRAY.format(tasks=tasks))
    for thread in probes:
        thread.start()
    try:
        status = cluster.wait(workflow_id, poll=0.1)
    finally:
        done.set()
        for thread in probes:
            thread.join()
    elapsed = time.perf_counter() - began
    cpu = cluster.cpu() - cpu_before
    fleet_cpu = cluster.fleet_cpu() - fleet_before
    database_cpu = cluster.database_cpu() - database_before
    passes_after, pass_seconds_after = cluster.engine_passes()
    passes, pass_seconds = passes_after - passes_before, pass_seconds_after - pass_seconds_before
    finished = cluster.tasks_finished(workflow_id)
    if not status.endswith("FINISHED"):
        print(f"    the array ended {status} with {finished} of {tasks} tasks finished")
    print(
        f"    CPU per job: Orchestrate {cpu / tasks * 1000:.2f} ms, hollow fleets"
        f" {fleet_cpu / tasks * 1000:.2f} ms, PostgreSQL's backends"
        f" {database_cpu / tasks * 1000:.2f} ms; load average {os.getloadavg()[0]:.1f}"
    )
    # the engine's one thread in passes (its CPU and its waits for PostgreSQL) for this
    # share of the wall; the rest it waited for reports (the fleets, the loop's turns)
    print(
        f"    engine passes: {passes / elapsed:.0f} a second, {tasks / max(passes, 1):.1f} jobs"
        f" and {pass_seconds / max(passes, 1) * 1000:.1f} ms each, in passes"
        f" {pass_seconds / elapsed * 100:.0f} % of the array's wall time"
    )
    latencies = {path: [taken for _, taken in spans] for path, spans in gets.items()}
    for path, taken in latencies.items():
        if not taken:
            continue
        # with ~30 GETs a list, the p99 is the slowest: which one it was says why
        slowest = ", ".join(f"{t * 1000:.0f}" for t in sorted(taken)[-5:])
        print(f"    {path}: the first GET {taken[0] * 1000:.0f} ms; the slowest five {slowest} ms")
    print_overlaps(gets["/workflows"], gets["/nodes"])
    return finished / elapsed, cpu / tasks * 1000, latencies["/workflows"], latencies["/nodes"]


def print_overlaps(workflows: list[tuple[float, float]], nodes: list[tuple[float, float]]) -> None:
    """The workflow list's GETs served while a node list was (both probes start together and
    wait as long between GETs, so many meet), against the others: the node list's CPU is
    taken in the same process's GIL turns."""
    met: list[float] = []
    alone: list[float] = []
    for sent, taken in workflows:
        meets = any(s < sent + taken and sent < s + t for s, t in nodes)
        (met if meets else alone).append(taken)
    for name, taken in (("during a node list", met), ("alone", alone)):
        if taken:
            print(
                f"    /workflows {name}: {len(taken)} GETs, median {median(taken) * 1000:.0f} ms,"
                f" slowest {max(taken) * 1000:.0f} ms"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="500,1000,2000,5000")
    parser.add_argument("--tasks", type=int, default=5000)
    parser.add_argument("--lease", type=float, default=15.0)
    parser.add_argument(
        "--window",
        type=float,
        default=60.0,
        help="seconds of idle lease traffic measured (several of the longest heartbeat interval)",
    )
    parser.add_argument(
        "--profile", metavar="DIR", help="py-spy Orchestrate (lease window, array) into DIR"
    )
    parser.add_argument(
        "--profile-gil",
        action="store_true",
        help="with --profile: record only the thread holding the GIL (py-spy --gil)",
    )
    parser.add_argument(
        "--quiet-jobs",
        action="store_true",
        help="the hollow jobs print nothing (as /bin/true: no log line a job, bench/e2e.py's case)",
    )
    parser.add_argument(
        "--pass-budget",
        type=float,
        help="Orchestrate's orchestrate.pass-budget in seconds (default: its own)",
    )
    parser.add_argument("--keepalive", help=KEEPALIVE_HELP)
    parser.add_argument(
        "--per-channel",
        type=int,
        default=NODES_PER_CHANNEL,
        help="hollow nodes sharing one connection (1: one each, as real agents; what is paid"
        " per connection, keepalive pings, then shows at full scale)",
    )
    options = parser.parse_args()
    sizes = [int(size) for size in options.sizes.split(",")]

    cluster = HollowCluster(lease=options.lease, keepalive=keepalive_option(options.keepalive))
    if options.pass_budget is not None:
        cluster.set_orchestrate("pass-budget", options.pass_budget)
    try:
        ready = cluster.start()
        print(f"Orchestrate on PostgreSQL serving in {ready:.2f} s; lease {options.lease:g} s")
        time.sleep(2)
        idle, _ = lease_cpu(cluster, options.window)
        print(f"no nodes: Orchestrate idle at {idle * 100:.1f} % of one core")
        rows = []
        for size in sizes:
            recorder = spy(cluster.pid, options.profile, f"join-{size}", gil=options.profile_gil)
            began = time.monotonic()
            cluster.add_nodes(
                size - cluster.nodes,
                per_channel=options.per_channel,
                **({"log_line": b""} if options.quiet_jobs else {}),
            )
            # a join is a Register and a Hello each, on Orchestrate's one loop: minutes for
            # thousands of nodes on a loaded machine
            cluster.wait_welcomed(size, timeout=max(300.0, 0.2 * size))
            joined = time.monotonic() - began
            unspy(recorder)
            time.sleep(options.lease / 3)  # every node past its first heartbeat
            recorder = spy(cluster.pid, options.profile, f"lease-{size}", gil=options.profile_gil)
            cpu, beats = lease_cpu(cluster, options.window)
            unspy(recorder)
            print(
                f"{size:>5} nodes: lease traffic {cpu * 100:.1f} % of a core (idle"
                f" {idle * 100:.1f} %), {beats:.0f} heartbeats/s; reconnects:"
                f" {cluster.stats().welcomed - size}",
                flush=True,
            )
            if not options.tasks:
                continue
            recorder = spy(cluster.pid, options.profile, f"array-{size}", gil=options.profile_gil)
            rate, per_job, workflows, nodes = zero_length_jobs(cluster, options.tasks)
            unspy(recorder)
            rss = rss_bytes(cluster.pid) / (1 << 20)
            rows.append((size, joined, cpu, rate, per_job, workflows, nodes, rss))
            print(
                f"{size:>5} nodes: joined in {joined:5.1f} s; lease traffic {cpu * 100:5.1f} % of a"
                f" core (idle {idle * 100:.1f} %); {rate:6.0f} zero-length jobs/s"
                f" ({per_job:.2f} ms Orchestrate CPU/job); workflow list p99"
                f" {p99(workflows) * 1000:.0f} ms (median {median(workflows) * 1000:.0f}),"
                f" node list p99 {p99(nodes) * 1000:.0f} ms (median {median(nodes) * 1000:.0f});"
                f" RSS {rss:.0f} MiB",
                flush=True,
            )
        print()
        print(
            "nodes | lease CPU (% core) | jobs/s | ms CPU/job | workflow list p99 | node list p99"
        )
        for size, _, cpu, rate, per_job, workflows, nodes, _ in rows:
            print(
                f"{size:>5} | {cpu * 100:18.1f} | {rate:6.0f} | {per_job:10.2f} |"
                f" {p99(workflows) * 1000:14.0f} ms | {p99(nodes) * 1000:10.0f} ms"
            )
        print("targets at 5,000: lease <= 10 %, >= 1,000 jobs/s, lists < 100 ms p99")
    finally:
        cluster.close()


if __name__ == "__main__":
    main()
