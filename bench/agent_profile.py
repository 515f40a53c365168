"""Profile the node agents' event loop during bench/e2e.py's (b) array.

Runs the same cluster as ``bench/e2e.py`` (Orchestrate in this process, two agents, the
image from a local registry), but starts each agent under ``cProfile`` timed by its main
thread's CPU clock (``time.thread_time``: the agent's event loop, where its per-job Python
work runs), switched on by SIGUSR1 just before the array is submitted and dumped on SIGUSR2
once it finished. Prints the agents' CPU per job, then the profile of both agents merged.
cProfile's own overhead inflates every figure; compare shares, not milliseconds, and take
the CPU per job from ``bench/e2e.py``. Usage (root):
    python bench/agent_profile.py [--tasks 2000] [--sort tottime] [--lines 60]
"""

from __future__ import annotations

import argparse
import io
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
import cProfile, os, signal, time
profile = cProfile.Profile(time.thread_time)
def _start(*_):
    profile.enable()
def _dump(*_):
    profile.disable()
    profile.dump_stats(os.environ["FB_AGENT_PROFILE"] + "." + str(os.getpid()))
signal.signal(signal.SIGUSR1, _start)
signal.signal(signal.SIGUSR2, _dump)
"""
    + cluster_module.SUBSTRATE_MAIN
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=2000)
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
                e2e.array_throughput(cluster, watch, args.tasks, profile=False)
                after = [e2e.cpu_seconds(a.process.pid)[0] for a in cluster.agents]
                for agent in cluster.agents:
                    agent.process.send_signal(signal.SIGUSR2)
                spent = sum(after) - sum(before)
                print(f"agents' CPU per job (profiled): {spent / args.tasks * 1000:.2f} ms")
                dumps = [Path(f"{prefix}.{a.process.pid}") for a in cluster.agents]
                deadline = time.monotonic() + 30
                while not all(d.exists() for d in dumps) and time.monotonic() < deadline:
                    time.sleep(0.2)
                time.sleep(1)  # the dump is written in one go, but let it finish
            finally:
                cluster.close()
        finally:
            registry.stop()
        out = io.StringIO()
        stats = pstats.Stats(*(str(d) for d in dumps), stream=out)
        if args.save:
            stats.dump_stats(args.save)
        stats.sort_stats(args.sort).print_stats(args.lines)
        print(out.getvalue())


if __name__ == "__main__":
    main()
