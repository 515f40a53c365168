"""Benchmark the default scheduler's placement core on a synthetic cluster.

    python bench/scheduler.py [--nodes 10000] [--jobs 100000] [--seed 1] [--accounts 1]
                              [--profile]
    python bench/scheduler.py --nodes 100000 --jobs 1000000     # the scale mode

The cluster mixes node shapes (small, standard and large CPU nodes, high-memory nodes, GPU nodes
with 4 or 8 GPUs), zone and fabric annotations, about 3% held nodes (cordon, evict,
deprovision from admin, monitoring and provisioner), 1% not ready and a few GPU nodes whose
device plugin failed. Jobs mix sizes from 1 core to 4-node and exclusive jobs, some with GPUs,
some with annotations, mostly with an expected runtime (their timeout). With ``--accounts N``
the jobs come from N accounts, a few submitting most of them (weights 1, 1/2, 1/3...), so the
passes order them by fair share; with one account (the default) the order is plain FIFO.

Three measurements, each timing only the scheduler's own calls (check_feasible at
submission, schedule, release) in CPU time of this process (``time.process_time``: the
machine is shared, and wall time would count other processes' turns on the cores):

1. fill: one pass over every job on the empty cluster (placements, then reservations,
   estimated starts and diagnoses for everything left waiting);
2. cost per decision at 1,000, 10,000 and 100,000 nodes (best of three runs below 100,000,
   one run there), on the same node and job mix, to show it grows far slower than the
   number of nodes;
3. churn: jobs arrive over time slightly faster than the cluster drains them, a pass runs every
   10 simulated seconds (``schedule_changes``, told the arrivals since the last pass, as the
   engine calls it), jobs end at a random fraction of their timeout and are released;
   runs until every job has been placed (the engine's submission check rejects jobs no node
   could ever hold).

The last line is ``placements/s: N``: placements divided by scheduler time over the churn run.

With 500,000 jobs or more (``--nodes 100000 --jobs 1000000``) the run is the scale mode
instead: every job is queued at once, a first pass fills the cluster, then passes follow in
which the running jobs that end first are released and the whole remaining queue is
considered again. It prints placements/s over those passes, the cost of a pass, and the
process's peak resident memory (``ru_maxrss``) against the 2 GiB target.

The cyclic collector runs with Orchestrate's threshold (``YOUNG_GENERATION_THRESHOLD``,
set by ``fuzzball_core.orchestrate.server`` for the process the engine's scheduler runs in),
not CPython's default.

No peer scheduler can run here, so Slurm's documented throughput is printed as a reference
line only, not as a measurement.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import heapq
import importlib
import importlib.util
import os
import pstats
import random
import resource
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from fuzzball_core.orchestrate.server import YOUNG_GENERATION_THRESHOLD
from fuzzball_core.scheduling import (
    Hold,
    JobRequest,
    NodeInfo,
    QueueChanges,
    Resources,
    Scheduler,
    ScheduleResult,
)
from fuzzball_plugins.schedulers.default import DefaultScheduler

GiB = 1 << 30
GPU = "nvidia.com/gpu"

# (weight, cores, memory GiB, gpus, extra annotations)
NODE_SHAPES = [
    (0.05, 8, 32, 0, {}),
    (0.45, 32, 128, 0, {}),
    (0.25, 64, 256, 0, {"fabric": "ib"}),
    (0.07, 96, 2048, 0, {"memory": "high"}),
    (0.12, 48, 512, 4, {"gpu": "a100"}),
    (0.06, 112, 2048, 8, {"gpu": "h100", "fabric": "ib"}),
]

# (weight, cores, memory GiB, gpus, nodes, exclusive)
JOB_SHAPES = [
    (0.30, 1, 2, 0, 1, False),
    (0.22, 4, 16, 0, 1, False),
    (0.12, 16, 64, 0, 1, False),
    (0.07, 32, 200, 0, 1, False),
    (0.03, 24, 1024, 0, 1, False),
    (0.07, 8, 64, 1, 1, False),
    (0.03, 16, 128, 4, 1, False),
    (0.04, 1, 1, 0, 1, True),
    (0.04, 16, 64, 0, 2, False),
    (0.02, 32, 128, 0, 4, False),
    (0.01, 8, 64, 8, 2, False),
]
RUNTIMES = [300.0, 600.0, 1800.0, 3600.0, 7200.0]
HOLDS = [
    Hold("cordon", "admin", "maintenance", "root", 0.0),
    Hold("cordon", "monitoring", "memory errors", "alertmanager", 0.0),
    Hold("evict", "monitoring", "GPU uncorrectable ECC", "alertmanager", 0.0),
    Hold("deprovision", "provisioner", "idle pool shrink", "provisioner", 0.0),
]


def make_nodes(count: int, rng: random.Random) -> list[NodeInfo]:
    """A synthetic cluster of ``count`` nodes."""
    weights = [shape[0] for shape in NODE_SHAPES]
    nodes = []
    for i in range(count):
        _, cores, memory, gpus, extra = rng.choices(NODE_SHAPES, weights)[0]
        roll = rng.random()
        holds = (rng.choice(HOLDS),) if roll < 0.03 else ()
        nodes.append(
            NodeInfo(
                id=f"node-{i:05d}",
                capacity=Resources(cores, memory * GiB, {GPU: gpus} if gpus else {}),
                annotations={"zone": "a" if i % 2 else "b", **extra},
                holds=holds,
                ready=not 0.03 <= roll < 0.04,
                device_plugin_failed=bool(gpus) and rng.random() < 0.02,
            )
        )
    return nodes


def make_jobs(
    count: int, rng: random.Random, arrival_rate: float, accounts: int = 1
) -> list[JobRequest]:
    """``count`` synthetic jobs arriving at ``arrival_rate`` per second on average, from
    ``accounts`` accounts."""
    return list(iter_jobs(count, rng, arrival_rate, accounts))


def iter_jobs(
    count: int, rng: random.Random, arrival_rate: float, accounts: int = 1
) -> Iterator[JobRequest]:
    """:func:`make_jobs` one job at a time (a caller that stops early builds no more)."""
    weights = [shape[0] for shape in JOB_SHAPES]
    # a generator of its own, so the job mix is the same whatever the number of accounts
    owners = random.Random(count)
    # one string per account, shared by its jobs (100,000 copies would slow the collector)
    names = [f"account-{k}" for k in range(accounts)]
    account_weights = [1 / (k + 1) for k in range(accounts)]
    amounts: dict[tuple[int, int, int], Resources] = {}
    now = 0.0
    for i in range(count):
        now += rng.expovariate(arrival_rate)
        _, cores, memory, gpus, nodes, exclusive = rng.choices(JOB_SHAPES, weights)[0]
        annotations = {}
        roll = rng.random()
        if roll < 0.15:
            annotations["zone"] = rng.choice("ab")
        elif roll < 0.20:
            annotations["fabric"] = "ib"
        if gpus and rng.random() < 0.3:
            annotations["gpu"] = "h100"
        resources = amounts.get((cores, memory, gpus))
        if resources is None:
            # one immutable amount per job size, as the tasks of an array share theirs
            resources = amounts[cores, memory, gpus] = Resources(
                cores, memory * GiB, {GPU: gpus} if gpus else {}
            )
        yield JobRequest(
            id=f"job-{i:06d}",
            resources=resources,
            nodes=nodes,
            exclusive=exclusive,
            annotations=annotations,
            submitted_at=now,
            priority=10 if rng.random() < 0.05 else 0,
            expected_runtime=None if rng.random() < 0.03 else rng.choice(RUNTIMES),
            account=owners.choices(names, account_weights)[0],
        )


def actual_runtime(job: JobRequest, rng: random.Random) -> float:
    """How long a job really runs: a random part of its timeout (an hour when it has none)."""
    return (job.expected_runtime or 3600.0) * rng.uniform(0.2, 1.0)


def fill(nodes: list[NodeInfo], jobs: list[JobRequest]) -> tuple[int, int, float]:
    """One pass over ``jobs`` on the empty cluster: (placed, waiting, seconds)."""
    scheduler = DefaultScheduler()
    for node in nodes:
        scheduler.upsert_node(node)
    started = time.process_time()
    result = scheduler.schedule(jobs, now=0.0)
    elapsed = time.process_time() - started
    return len(result.placements), len(result.diagnoses), elapsed


def decision_cost(nodes: list[NodeInfo], seed: int) -> tuple[float, float]:
    """Microseconds per placement and per diagnosed failure on a cluster over half full.

    The background and the placement probes are single-node jobs of 1 to 16 cores; the
    placement figure is one pass of up to 2,000 probes that all fit. Failures: one pass of
    1,000 jobs of distinct shapes (so none shares a survey) that ask for a pool of nodes
    whose every core is taken; each is surveyed over the whole cluster. Estimated starts are
    off here: they are one replay per pass, not a cost per decision.
    """
    rng = random.Random(seed)
    pool = {node.id for node in nodes[:: max(1, len(nodes) // 50)] if node.takes_new_work}
    scheduler = DefaultScheduler({"estimate_starts": False})
    for info in nodes:
        if info.id in pool:
            info = NodeInfo(
                info.id, info.capacity, {**info.annotations, "pool": "probe"}, info.holds
            )
        scheduler.upsert_node(info)
    for node_id in pool:
        capacity = scheduler.node_usage(node_id).capacity
        filler = JobRequest(f"pool-{node_id}", Resources(capacity.cores, 0), expected_runtime=1)
        scheduler.allocate(filler, [node_id], started_at=0.0)
    total_cores = sum(node.capacity.cores for node in nodes)
    background = []
    used = 0
    for job in iter_jobs(len(nodes) * 10, rng, arrival_rate=1.0):
        if _small_single_node(job):
            background.append(job)
            used += job.resources.cores
            if used >= 0.6 * total_cores:
                break
    scheduler.schedule(background, now=0.0)

    # as many probes as fit comfortably in what is left, up to 2,000
    probes = []
    probe_cores = 0
    for i, job in enumerate(make_jobs(4000, rng, 1.0)):
        if not _small_single_node(job):
            continue
        probe_cores += job.resources.cores
        if len(probes) == 2000 or probe_cores > 0.1 * total_cores:
            break
        probes.append(JobRequest(f"probe-{i}", job.resources, submitted_at=i))
    # a full collection of the set-up's garbage is the set-up's cost, not a decision's
    gc.collect()
    started = time.process_time()
    result = scheduler.schedule(probes, now=0.0)
    place_us = (time.process_time() - started) / max(len(result.placements), 1) * 1e6
    assert len(result.placements) == len(probes), "every placement probe should fit"
    for placement in result.placements:
        scheduler.release(placement.job_id)

    failures = [
        JobRequest(
            f"fail-{i}",
            Resources(1, (i + 1) << 20),
            annotations={"pool": "probe"},
            submitted_at=i,
            expected_runtime=600.0,
        )
        for i in range(1000)
    ]
    gc.collect()
    started = time.process_time()
    result = scheduler.schedule(failures, now=0.0)
    fail_us = (time.process_time() - started) / max(len(result.diagnoses), 1) * 1e6
    assert not result.placements, "the probe pool should be full"
    return place_us, fail_us


def _small_single_node(job: JobRequest) -> bool:
    return (
        job.nodes == 1
        and not job.exclusive
        and not job.resources.devices
        and (job.resources.cores <= 16)
    )


def churn(
    nodes: list[NodeInfo],
    jobs: list[JobRequest],
    rng: random.Random,
    interval: float,
    factories: Sequence[Callable[[], Scheduler]] = (DefaultScheduler,),
    collector_in_timing: bool = True,
) -> dict[str, Any]:
    """Simulate arrivals, passes every ``interval`` seconds and job ends until all are placed.

    With several ``factories`` (``--baseline``: this tree's scheduler and another tree's),
    each scheduler is fed the same arrivals, releases and queue, their calls are timed
    separately with the order alternating pass by pass, and their placements and
    reservations must be equal pass by pass; ``seconds`` then lists each one's time. Without
    ``collector_in_timing`` the cyclic collector is off during the timed calls (it runs
    between them, untimed): with two schedulers in one heap a collection is charged to
    whichever call it lands in.
    """
    schedulers = [factory() for factory in factories]
    for scheduler in schedulers:
        for node in nodes:
            scheduler.upsert_node(node)
    arrivals: Iterator[JobRequest] = iter(jobs)
    upcoming = next(arrivals, None)
    pending: dict[str, JobRequest] = {}
    ends: list[tuple[float, str]] = []
    sched_time = [0.0] * len(schedulers)
    placements = passes = queue_total = rejected = 0
    now = 0.0
    while upcoming is not None or pending:
        now += interval
        # the simulation's own bookkeeping (its arrivals, its heap of job ends, the queue
        # it hands over) stays outside the timed calls: only the scheduler's are counted
        arrived: list[JobRequest] = []
        while upcoming is not None and upcoming.submitted_at <= now:
            arrived.append(upcoming)
            upcoming = next(arrivals, None)
        ended = []
        while ends and ends[0][0] <= now:
            ended.append(heapq.heappop(ends)[1])
        # as the engine does: the queue's changes since the last pass (the jobs the
        # scheduler placed leave its copy by themselves), the whole queue only on request
        accepted: list[JobRequest] = []
        results: list[ScheduleResult] = []
        order = range(len(schedulers)) if passes % 2 == 0 else range(len(schedulers) - 1, -1, -1)
        for number in order:
            scheduler = schedulers[number]
            if not collector_in_timing:
                gc.disable()
            started = time.process_time()
            # the engine rejects at submission what no node could ever hold
            verdicts = [scheduler.check_feasible(job) for job in arrived]
            for job_id in ended:
                scheduler.release(job_id)
            sched_time[number] += time.process_time() - started
            if not results:
                accepted = [job for job, v in zip(arrived, verdicts, strict=True) if v is None]
                rejected += len(arrived) - len(accepted)
                pending.update((job.id, job) for job in accepted)
            changes = QueueChanges(passes + 1, accepted, (), len(pending))
            started = time.process_time()
            result = scheduler.schedule_changes(changes, lambda: list(pending.values()), now)
            sched_time[number] += time.process_time() - started
            if not collector_in_timing:
                gc.enable()
            results.append(result)
        first = results[0]
        for other in results[1:]:
            if _decided(other) != _decided(first):
                raise AssertionError(f"the schedulers placed differently in pass {passes + 1}")
        passes += 1
        queue_total += len(pending)
        for placement in first.placements:
            job = pending.pop(placement.job_id)
            heapq.heappush(ends, (now + actual_runtime(job, rng), job.id))
        placements += len(first.placements)
        if not ends and not first.placements and upcoming is None:
            break  # nothing runs and nothing could start: the rest can never be placed
    return {
        "placements": placements,
        "seconds": sched_time[0],
        "each": sched_time,
        "passes": passes,
        "mean_queue": queue_total / max(passes, 1),
        "simulated_hours": now / 3600,
        "rejected": rejected,
    }


def _decided(result: ScheduleResult) -> tuple[object, ...]:
    """What a pass decided that two schedulers must agree on: the placements in order and
    the reservation."""
    return (
        [(p.job_id, p.node_ids, dict(p.cpus), p.note) for p in result.placements],
        result.reservation,
    )


def baseline_scheduler(tree: str) -> Callable[[], Scheduler]:
    """The default scheduler of another checkout at ``tree`` (its ``plugins/schedulers``),
    loaded beside this tree's under the same module names, which are then restored."""
    prefix = "fuzzball_plugins.schedulers"
    ours = {name: module for name, module in sys.modules.items() if name.startswith(prefix)}
    parent = sys.modules["fuzzball_plugins"]
    attribute = getattr(parent, "schedulers", None)
    for name in ours:
        del sys.modules[name]
    folder = os.path.join(tree, "plugins", "schedulers")
    spec = importlib.util.spec_from_file_location(
        prefix, os.path.join(folder, "__init__.py"), submodule_search_locations=[folder]
    )
    assert spec is not None and spec.loader is not None
    package = importlib.util.module_from_spec(spec)
    sys.modules[prefix] = package
    try:
        spec.loader.exec_module(package)
        factory: Callable[[], Scheduler] = importlib.import_module(
            f"{prefix}.default"
        ).DefaultScheduler
    finally:
        # the baseline's modules keep their own references; this tree's come back
        for name in [name for name in sys.modules if name.startswith(prefix)]:
            del sys.modules[name]
        sys.modules.update(ours)
        if attribute is not None:
            parent.schedulers = attribute
    return factory


#: Printed for scale, not measured: no Slurm runs here, and its figure is whole-system
#: throughput (submission to completion) on server hardware, not placement alone.
SLURM_REFERENCE = (
    "reference (not measured here; no peer can run on this machine): Slurm documents about "
    "500 jobs/s sustained through slurmctld on server hardware (submission to completion)"
)
#: The cluster sizes the cost per decision is printed at.
DECISION_SIZES = (1_000, 10_000, 100_000)


def print_decision_costs(seed: int) -> None:
    """Cost per decision at each of :data:`DECISION_SIZES` nodes, on one node mix (the
    smaller clusters are the first nodes of the largest)."""
    nodes = make_nodes(max(DECISION_SIZES), random.Random(seed))
    figures = []
    for size in DECISION_SIZES:
        # best of three where it is cheap: the figure is the cost, not the machine's load
        runs = [decision_cost(nodes[:size], seed) for _ in range(3 if size < 100_000 else 1)]
        place_us = min(run[0] for run in runs)
        fail_us = min(run[1] for run in runs)
        figures.append((size, place_us, fail_us))
        print(
            f"cost per decision, {size:,} nodes: {place_us:.1f} us per placement, "
            f"{fail_us:.1f} us per diagnosed failure"
        )
    (small, place_small, fail_small), (large, place_large, fail_large) = figures[0], figures[-1]
    print(
        f"growth from {small:,} to {large:,} nodes ({large // small}x): placement "
        f"{place_large / place_small:.2f}x, diagnosed failure {fail_large / fail_small:.2f}x"
    )


def scale(nodes: list[NodeInfo], jobs: list[JobRequest], passes: int) -> dict[str, float]:
    """Queue every job at once on a big cluster: a first pass fills it, then ``passes``
    more each release the running jobs that end first (a tenth of the cluster's running
    jobs) and consider the whole remaining queue again."""
    scheduler = DefaultScheduler()
    for node in nodes:
        scheduler.upsert_node(node)
    rng = random.Random(len(jobs))
    pending = {job.id: job for job in jobs}
    ends: list[tuple[float, str]] = []
    now = 0.0
    seconds = first = 0.0
    placements = first_placed = 0
    for number in range(passes + 1):
        started = time.process_time()
        if number:
            for _ in range(max(1, len(ends) // 10)):
                if not ends:
                    break
                end, job_id = heapq.heappop(ends)
                now = max(now, end)
                scheduler.release(job_id)
        # as the engine calls it: nothing arrives after the first pass, and the placed jobs
        # leave the scheduler's copy of the queue by themselves
        changes = QueueChanges(number + 1, () if number else jobs, (), len(pending))
        result = scheduler.schedule_changes(changes, lambda: list(pending.values()), now)
        elapsed = time.process_time() - started
        seconds += elapsed
        if not number:
            first, first_placed = elapsed, len(result.placements)
        placements += len(result.placements)
        for placement in result.placements:
            job = pending.pop(placement.job_id)
            heapq.heappush(ends, (now + actual_runtime(job, rng), job.id))
    return {
        "placements": placements,
        "seconds": seconds,
        "first": first,
        "first_placed": first_placed,
        "later": (seconds - first) / max(passes, 1),
        "queue": len(pending),
    }


def peak_rss_mib() -> float:
    """This process's peak resident memory so far, in MiB (``ru_maxrss`` is KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, run the three measurements and print their figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10000)
    parser.add_argument("--jobs", type=int, default=100000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--interval", type=float, default=10.0, help="seconds between passes")
    parser.add_argument("--accounts", type=int, default=1, help="accounts submitting the jobs")
    parser.add_argument("--profile", action="store_true", help="cProfile the churn run")
    parser.add_argument(
        "--baseline",
        metavar="TREE",
        help="also run another checkout's default scheduler in the churn run, in the same "
        "process with the passes alternated (e.g. a git worktree of an older commit)",
    )
    parser.add_argument(
        "--churn-only", action="store_true", help="skip the fill pass and the decision costs"
    )
    parser.add_argument(
        "--collector-untimed",
        action="store_true",
        help="run the cyclic collector only between the timed calls of the churn run",
    )
    parser.add_argument(
        "--passes", type=int, default=3, help="passes after the first, in the scale mode"
    )
    args = parser.parse_args(argv)
    # the collector as Orchestrate sets it for the process its scheduler runs in (at
    # CPython's default of 700 young collections were about 8 % of the churn run)
    _, middle, full = gc.get_threshold()
    gc.set_threshold(YOUNG_GENERATION_THRESHOLD, middle, full)
    if args.jobs >= 500_000:
        main_scale(args)
        return

    rng = random.Random(args.seed)
    nodes = make_nodes(args.nodes, rng)
    # arrivals a little faster than the cluster drains them, so a queue builds up
    total_cores = sum(node.capacity.cores for node in nodes)
    arrival_rate = total_cores / 11.0 / 1750.0 * 1.1
    jobs = make_jobs(args.jobs, rng, arrival_rate, args.accounts)
    held = sum(1 for node in nodes if node.holds)
    gpu_nodes = sum(1 for node in nodes if node.capacity.devices)
    print(f"cluster: {len(nodes)} nodes ({gpu_nodes} with GPUs, {held} held), {total_cores} cores")
    print(
        f"jobs: {len(jobs)} from {args.accounts} account(s), arriving over "
        f"{jobs[-1].submitted_at / 3600:.1f} h"
    )

    if not args.churn_only:
        placed, waiting, seconds = fill(nodes, jobs)
        print(
            f"fill pass: {placed} placed, {waiting} diagnosed in {seconds:.2f} s "
            f"({(placed + waiting) / seconds:,.0f} decisions/s)"
        )
        print_decision_costs(args.seed)

    factories: list[Callable[[], Scheduler]] = [DefaultScheduler]
    if args.baseline:
        factories.append(baseline_scheduler(args.baseline))
    profiler = cProfile.Profile() if args.profile else None
    if profiler:
        profiler.enable()
    stats = churn(
        nodes,
        jobs,
        random.Random(args.seed),
        args.interval,
        factories,
        collector_in_timing=not args.collector_untimed,
    )
    if profiler:
        profiler.disable()
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
    print(
        f"churn: {stats['placements']:.0f} placements in {stats['passes']:.0f} passes over "
        f"{stats['simulated_hours']:.1f} simulated hours, mean queue {stats['mean_queue']:.0f} "
        f"jobs, {stats['rejected']:.0f} rejected as infeasible, "
        f"scheduler time {stats['seconds']:.2f} s"
    )
    if args.baseline:
        ours, theirs = stats["each"]
        print(
            f"baseline {args.baseline}, same process, passes alternated: "
            f"{stats['placements'] / theirs:.0f} placements/s ({theirs:.2f} s) against "
            f"{stats['placements'] / ours:.0f} ({ours:.2f} s) for this tree, "
            f"{theirs / ours:.2f}x"
        )
    print(SLURM_REFERENCE)
    print(f"placements/s: {stats['placements'] / stats['seconds']:.0f}")


def main_scale(args: argparse.Namespace) -> None:
    """The scale mode: every job queued at once on a big cluster; placements/s and peak RSS."""
    rng = random.Random(args.seed)
    nodes = make_nodes(args.nodes, rng)
    total_cores = sum(node.capacity.cores for node in nodes)
    jobs = make_jobs(args.jobs, rng, total_cores / 11.0 / 1750.0 * 1.1, args.accounts)
    print(f"cluster: {len(nodes)} nodes, {total_cores} cores; {len(jobs)} jobs queued at once")
    profiler = cProfile.Profile() if args.profile else None
    if profiler:
        profiler.enable()
    stats = scale(nodes, jobs, args.passes)
    if profiler:
        profiler.disable()
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
    print(
        f"first pass: {stats['first_placed']:.0f} placed, the rest diagnosed, in "
        f"{stats['first']:.1f} s; later passes: {stats['later']:.2f} s each over a queue of "
        f"about {stats['queue']:,.0f} jobs"
    )
    rss = peak_rss_mib()
    verdict = "within" if rss <= 2048 else "OVER"
    print(f"peak RSS: {rss:,.0f} MiB ({verdict} the 2 GiB target)")
    print(SLURM_REFERENCE)
    print(f"placements/s: {stats['placements'] / stats['seconds']:.0f}")


if __name__ == "__main__":
    main()
