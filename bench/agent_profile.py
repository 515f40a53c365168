"""Profile the node agents' event loop during bench/e2e.py's (b) array or (c) separate workflows.

Runs the same cluster as ``bench/e2e.py`` (Orchestrate in this process, two agents, the
image from a local registry), but starts each agent under ``cProfile`` timed by its main
thread's CPU clock (``time.thread_time``: the agent's event loop, where its per-job Python
work runs) and with the CPU its garbage collections took, switched on by SIGUSR1 just
before the jobs are submitted and dumped on SIGUSR2 once it finished. Prints the agents'
CPU per job and collections, then the profile of both agents merged. cProfile's own
overhead inflates every figure; compare shares, not milliseconds, and take the CPU per job
from ``bench/e2e.py``. Usage (root):
    python bench/agent_profile.py [--tasks 2000] [--separate] [--sort tottime] [--lines 60]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import pstats
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/e2e.py
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tests/support

import e2e
from support import cluster as cluster_module
from support.cluster import HELLO_WORLD, Cluster, LocalRegistry, have_prerequisites

#: The agent's entry point, wrapped: SIGUSR1 starts the profile, SIGUSR2 writes it to
#: ``$FB_AGENT_PROFILE.<pid>`` (signal handlers run on the main thread: the event loop's).
PROFILED_MAIN = (
    """
import cProfile, gc, json, os, signal, time
profile = cProfile.Profile(time.thread_time)
collections = {"seconds": [0.0, 0.0, 0.0], "count": [0, 0, 0]}
began = [0.0]
def _collected(phase, info):
    if phase == "start":
        began[0] = time.thread_time()
    else:
        collections["seconds"][info["generation"]] += time.thread_time() - began[0]
        collections["count"][info["generation"]] += 1
def _start(*_):
    gc.callbacks.append(_collected)
    profile.enable()
def _dump(*_):
    profile.disable()
    gc.callbacks.remove(_collected)
    prefix = os.environ["FB_AGENT_PROFILE"] + "." + str(os.getpid())
    with open(prefix + ".gc", "w") as out:
        json.dump(collections, out)
    profile.dump_stats(prefix)
signal.signal(signal.SIGUSR1, _start)
signal.signal(signal.SIGUSR2, _dump)
"""
    + cluster_module.SUBSTRATE_MAIN
)


def threads_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of each of the process's threads so far, summed by thread name (the
    kernel's ``comm``: the event loop's thread carries the program's name)."""
    ticks = os.sysconf("SC_CLK_TCK")
    spent: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError):  # a thread that just ended
            text = (task / "stat").read_text()
            name = text[text.index("(") + 1 : text.rindex(")")].rstrip("0123456789_")
            fields = text.rsplit(")", 1)[1].split()
            spent[name] = spent.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / ticks
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument(
        "--separate",
        action="store_true",
        help="profile (c): --tasks single-job workflows instead of one --tasks-task array",
    )
    parser.add_argument("--sort", default="tottime")
    parser.add_argument("--lines", type=int, default=60)
    parser.add_argument("--save", help="also write the merged profile to this file")
    args = parser.parse_args()
    missing = have_prerequisites()
    if missing is not None:
        sys.exit(f"bench/agent_profile.py: {missing}")
    with tempfile.TemporaryDirectory(prefix="fuzzball-bench-agent-") as temporary:
        directory = Path(temporary)
        prefix = str(directory / "agent.prof")
        os.environ["FB_AGENT_PROFILE"] = prefix
        cluster_module.SUBSTRATE_MAIN = PROFILED_MAIN
        registry = LocalRegistry(directory / "registry")
        try:
            cluster = Cluster(
                directory, registry.url, agents=2, cores=32, memory="64GiB", substrate={}
            )
            try:
                watch = e2e.EndWatch(cluster)
                for _ in range(4):  # warm both nodes' caches and pinned tags
                    warm = cluster.orchestrate.start_workflow(HELLO_WORLD.read_text())
                    assert watch.wait(warm) == "workflow_finished"
                for agent in cluster.agents:
                    agent.process.send_signal(signal.SIGUSR1)
                before = [e2e.cpu_seconds(a.process.pid)[0] for a in cluster.agents]
                threads_before = [threads_cpu(a.process.pid) for a in cluster.agents]
                throughput = e2e.separate_throughput if args.separate else e2e.array_throughput
                throughput(cluster, watch, args.tasks, profile=False)
                after = [e2e.cpu_seconds(a.process.pid)[0] for a in cluster.agents]
                by_thread: dict[str, float] = {}
                for agent, earlier in zip(cluster.agents, threads_before, strict=True):
                    for name, seconds in threads_cpu(agent.process.pid).items():
                        by_thread[name] = by_thread.get(name, 0.0) + seconds - earlier.get(name, 0)
                for agent in cluster.agents:
                    agent.process.send_signal(signal.SIGUSR2)
                spent = sum(after) - sum(before)
                print(f"agents' CPU per job (profiled): {spent / args.tasks * 1000:.2f} ms")
                print(
                    "  by thread: "
                    + ", ".join(
                        f"{name} {seconds / args.tasks * 1000:.2f} ms"
                        for name, seconds in sorted(by_thread.items(), key=lambda i: -i[1])
                        if seconds > 0
                    )
                )
                dumps = [Path(f"{prefix}.{a.process.pid}") for a in cluster.agents]
                deadline = time.monotonic() + 30
                while not all(d.exists() for d in dumps) and time.monotonic() < deadline:
                    time.sleep(0.2)
                time.sleep(1)  # the dump is written in one go, but let it finish
            finally:
                cluster.close()
        finally:
            registry.stop()
        for dump in dumps:
            collected = json.loads(Path(f"{dump}.gc").read_text())
            print(
                f"{dump.name}: garbage collections by generation "
                f"{collected['count']}, CPU {[round(t, 3) for t in collected['seconds']]} s"
            )
        out = io.StringIO()
        stats = pstats.Stats(*(str(d) for d in dumps), stream=out)
        if args.save:
            stats.dump_stats(args.save)
        stats.sort_stats(args.sort).print_stats(args.lines)
        print(out.getvalue())


if __name__ == "__main__":
    main()
