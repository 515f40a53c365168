"""Multinode MPI benchmark: a 2-node x 2-rank MPICH job through the whole system.

Prints, from one run:
(a) the median time from submission to FINISHED of ``tests/fixtures/mpi/ring.c`` (MPI_Init,
    an Allreduce, a barrier) on two Substrate agents, image cached: scheduling, both nodes'
    containers, PMI wire-up with the barriers relayed through Orchestrate;
(b) the same program's median under MPICH's own launcher on this machine (``mpiexec -n 4``,
    Hydra, ranks as plain processes) over shared memory and over TCP (the transport the
    containers use between nodes), and the ratio to the latter.

Needs root, MPICH (``mpicc``, ``mpiexec``), Debian's docker-registry and busybox-static.
Usage: python bench/mpi.py [--runs 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tests/support

from support.cluster import Cluster, LocalRegistry, have_prerequisites
from support.mpi_image import build_ring, push_ring_image

WORKFLOW = """
version: v4
jobs:
  ring:
    image: {{uri: "{image}"}}
    command: [/opt/ring]
    env: ["UCX_TLS=tcp,self"]
    multinode: {{nodes: 2, procs-per-node: 2, implementation: mpich}}
"""


def through_fuzzball(cluster: Cluster, image: str, runs: int) -> float:
    """Median submission-to-FINISHED seconds of the 2x2 ring (one warm-up run first)."""
    orchestrate = cluster.orchestrate
    specification = WORKFLOW.format(image=image)
    orchestrate.wait_for(orchestrate.start_workflow(specification), timeout=120)
    samples = []
    for _ in range(runs):
        began = time.perf_counter()
        view = orchestrate.wait_for(orchestrate.start_workflow(specification), timeout=120)
        samples.append(time.perf_counter() - began)
        assert view.status == "FINISHED", [(s.name, s.message) for s in view.stages]
    return statistics.median(samples)


def through_hydra(program: Path, runs: int, *env: str) -> float:
    """Median seconds of ``mpiexec -n 4 ring`` (Hydra ends it with a bad-termination notice
    because ring.c skips MPI_Finalize; the time to get there is what is compared)."""
    samples = []
    for _ in range(runs + 1):
        began = time.perf_counter()
        subprocess.run(
            ["mpiexec.mpich", "-n", "4", "env", *env, str(program)],
            capture_output=True,
            timeout=60,
            check=False,
        )
        samples.append(time.perf_counter() - began)
    return statistics.median(samples[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    missing = have_prerequisites()
    if missing is not None:
        sys.exit(missing)
    with tempfile.TemporaryDirectory(prefix="fuzzball-bench-mpi-") as scratch:
        directory = Path(scratch)
        program = build_ring(directory)
        if program is None:
            sys.exit("MPICH is not installed (apt-get install mpich libmpich-dev)")
        registry = LocalRegistry(directory / "registry")
        cluster = None
        try:
            image = push_ring_image(registry.url, program)
            cluster = Cluster(directory / "cluster", registry.url, agents=2, cores=2)
            ours = through_fuzzball(cluster, image, args.runs)
        finally:
            if cluster is not None:
                cluster.close()
            registry.stop()
        hydra = through_hydra(program, args.runs)
        hydra_tcp = through_hydra(program, args.runs, "UCX_TLS=tcp,self")
    print(f"2x2 MPI ring through Fuzzball (two agents, containers, TCP): {ours * 1000:.0f} ms")
    print(f"same program under Hydra (mpiexec -n 4, shared memory): {hydra * 1000:.0f} ms")
    print(f"same program under Hydra (mpiexec -n 4, TCP): {hydra_tcp * 1000:.0f} ms")
    print(f"ratio: {ours / hydra_tcp:.2f}x Hydra's time on the same transport")


if __name__ == "__main__":
    main()
