"""The returning nodes of a restart, in-process: Orchestrate's CPU and PostgreSQL statements
for N nodes' Register and Hello, applied one at a time (each its own transaction, as the
node API did before ``node_arrivals``) against applied together (``node_arrivals.Arrivals``:
the arrivals of one loop turn in one transaction, at most ``MAX_BATCH``).

An engine over a fresh PostgreSQL database with ``--nodes`` nodes holding ``--runs`` running
jobs each; then, per round, the engine is replaced by a restarted one (``recover``) and every
node registers and says Hello again, all Registers arriving together and then all Hellos
(as after a restart, when every node's channel reconnects at once). Rounds alternate the
two ways; CPU is this process's (``time.process_time``), which on a loaded machine is the
figure to compare. Needs Debian's postgresql (``scripts/start-postgres.sh``). Usage:
    python bench/restart_arrivals.py [--nodes 500] [--runs 20] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

from sqlalchemy import event

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "orchestrate"))

from conftest import Harness, build_harness  # the engine tests' harness
from hollow_cluster import fresh_database

from fuzzball_core.orchestrate.engine import Engine
from fuzzball_core.scheduling import Resources

try:
    from fuzzball_core.orchestrate.node_arrivals import Arrivals, Registration
except ImportError:  # a tree from before node_arrivals (run there for its one-at-a-time way)
    Arrivals = Registration = None  # type: ignore[assignment,misc]

ARRAY = """
version: v1
jobs:
  held:
    image: {{uri: docker://alpine:latest}}
    command: [sleep, "600"]
    resource: {{cpu: {{cores: 1}}, memory: {{size: 64MB}}}}
    task-array: {{start: 1, end: {tasks}}}
"""
#: tasks per array, within the engine's default window (512) in flight
ARRAY_TASKS = 500


def populate(harness: Harness, nodes: int, runs: int) -> dict[str, tuple[str, list[int]]]:
    """``nodes`` nodes of ``runs`` cores, each running ``runs`` tasks of arrays of
    :data:`ARRAY_TASKS`; {name: (node id, its run ids)}."""
    ids = {
        f"n{i}": harness.engine.register_node(f"n{i}", Resources(runs, 64 << 30, {}), {})
        for i in range(nodes)
    }
    jobs = nodes * runs
    for first in range(0, jobs, ARRAY_TASKS):
        harness.submit(ARRAY.format(tasks=min(ARRAY_TASKS, jobs - first)))
    held: dict[str, list[int]] = {node_id: [] for node_id in ids.values()}
    while sum(map(len, held.values())) < nodes * runs:
        harness.engine.step()
        for node_id, message in harness.hub.take("assign"):
            harness.start(node_id, message.assign.run_id)
            held[node_id].append(message.assign.run_id)
    harness.engine.step()
    return {name: (node_id, held[node_id]) for name, node_id in ids.items()}


def registration(name: str, cores: int) -> Registration:
    """A hollow node's Register."""
    assert Registration is not None
    return Registration(name, Resources(cores, 64 << 30, {}), {}, version="99.0")


def one_at_a_time(engine: Engine, cluster: dict[str, tuple[str, list[int]]], runs: int) -> None:
    """Every node's Register, then every Hello, each its own transaction."""
    for name in cluster:
        engine.register_node(name, Resources(runs, 64 << 30, {}), {}, version="99.0")
    for node_id, run_ids in cluster.values():
        assert engine.node_hello(node_id, run_ids) == []


def together(engine: Engine, cluster: dict[str, tuple[str, list[int]]], runs: int) -> None:
    """Every node's Register arriving in one loop turn, then every Hello."""
    assert Arrivals is not None
    arrivals = Arrivals(engine.context, engine.arrivals_change)

    async def main() -> None:
        await asyncio.gather(*(arrivals.register(registration(n, runs)) for n in cluster))
        answers = await asyncio.gather(
            *(arrivals.hello(node_id, run_ids) for node_id, run_ids in cluster.values())
        )
        assert all(answer == [] for answer in answers)

    asyncio.run(main())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--runs", type=int, default=20, help="running jobs per node")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each way, alternated")
    options = parser.parse_args()

    harness = build_harness(fresh_database("fuzzball_arrivals"))
    began = time.perf_counter()
    cluster = populate(harness, options.nodes, options.runs)
    print(
        f"{options.nodes} nodes running {options.nodes * options.runs} jobs"
        f" (set up in {time.perf_counter() - began:.0f} s)"
    )
    statements: list[str] = []
    bind = harness.engine.sessions.kw["bind"]
    event.listen(bind, "before_cursor_execute", lambda *args: statements.append(args[2]))
    ways = [("one at a time", one_at_a_time)]
    if Arrivals is not None:
        ways.append(("together", together))
    results: dict[str, list[tuple[float, float, int]]] = {way: [] for way, _ in ways}
    for _ in range(options.rounds):
        for way, apply in ways:
            engine = harness.restarted()
            statements.clear()
            cpu, wall = time.process_time(), time.perf_counter()
            apply(engine, cluster, options.runs)
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            count = len(statements)
            results[way].append((cpu, wall, count))
            engine.step()  # nothing was lost: every run still held
            assert not harness.hub.take("cancel")
            print(
                f"{way}: {cpu:.2f} s CPU ({cpu / options.nodes * 1000:.1f} ms a node),"
                f" {wall:.2f} s wall, {count} statements ({count / options.nodes:.1f} a node)",
                flush=True,
            )
    for way, figures in results.items():
        cpus = [cpu for cpu, _, _ in figures]
        print(
            f"{way}: median {statistics.median(cpus):.2f} s CPU"
            f" ({statistics.median(cpus) / options.nodes * 1000:.1f} ms a node),"
            f" {figures[0][2] / options.nodes:.1f} statements a node"
        )


if __name__ == "__main__":
    main()
