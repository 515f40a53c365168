"""The engine's idle pass at hollow-node scale, in-process: the CPU of one pass with every
node READY and idle, their heartbeats renewing leases in memory between passes.

The engine tests' harness (SQLite in a temporary directory, a fake clock) registers the
nodes and says their Hello; then each pass takes the heartbeats a second of the cluster
sends at the interval the Welcome names (nodes / (lease / 3)), advances the clock a second
and runs a pass, as ``Engine.run`` does every ``tick`` on an idle cluster. What this
isolates from ``bench/hollow.py``'s lease traffic is what grows with the number of idle
nodes besides gRPC's work per heartbeat. Compare trees by putting each on PYTHONPATH in
turn, alternating. Usage: python bench/lease_passes.py [--nodes 5000] [--passes 60]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path[:0] = [str(TESTS / "orchestrate"), str(TESTS)]  # support/ and the engine harness

from conftest import Harness, build_harness  # noqa: E402

from fuzzball_core.orchestrate import nodes  # noqa: E402


def joined(count: int) -> tuple[Harness, list[str]]:
    """A harness with ``count`` READY nodes of 64 cores that said their Hello."""
    harness = build_harness(f"sqlite:///{tempfile.mkdtemp()}/store.db")
    node_ids = []
    for index in range(count):
        node_id = harness.node(f"n{index:05d}", cores=64, memory=256 << 30)
        harness.engine.node_hello(node_id, [])
        node_ids.append(node_id)
    harness.engine.step()
    return harness, node_ids


def idle_pass_cpu(harness: Harness, node_ids: list[str], passes: int) -> float:
    """CPU seconds per idle pass, the in-memory heartbeats of its second included."""
    ctx = harness.engine.context
    per_second = int(len(node_ids) / (nodes.lease_of(ctx, node_ids[0]) / 3))
    beat = 0
    started = time.process_time()
    for _ in range(passes):
        for _ in range(per_second):
            nodes.heartbeat(ctx, node_ids[beat % len(node_ids)])
            beat += 1
        harness.clock.now += 1.0
        harness.engine.step()
    return (time.process_time() - started) / passes


def main() -> None:
    """Print the idle pass's CPU at ``--nodes``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--passes", type=int, default=60)
    args = parser.parse_args()
    harness, node_ids = joined(args.nodes)
    cpu = idle_pass_cpu(harness, node_ids, args.passes)
    print(f"{args.nodes} nodes: {cpu * 1000:.2f} ms CPU per idle pass ({args.passes} passes)")


if __name__ == "__main__":
    main()
