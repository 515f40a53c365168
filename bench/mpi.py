"""Multinode MPI benchmark: 2-node x 2-rank MPICH and Open MPI jobs through the whole system.

Prints, from one run, for each implementation:
(a) the median time from submission to FINISHED of ``tests/fixtures/mpi/ring.c`` (MPI_Init,
    an Allreduce, a barrier) built with it, on two Substrate agents each in its own network
    namespace (``tests/support/netns_cluster.py``: real interfaces), image cached:
    scheduling, both nodes' containers and the wire-up (MPICH: each node's PMI-1 service,
    barriers relayed through Orchestrate; Open MPI: mpirun in the first node's container
    starting orted in the second's through Substrate);
(b) the same program's median under that implementation's own launcher on this machine
    (MPICH: ``mpiexec.mpich -n 4``, Hydra; Open MPI: ``mpirun.openmpi -np 4``), ranks as plain
    processes, over TCP (the transport the containers use between nodes) and over shared
    memory, and the ratio of (a) to the TCP figure.

Needs root, MPICH (``mpicc.mpich``, ``mpiexec.mpich``) and/or Open MPI (``mpicc.openmpi``,
``mpirun.openmpi``), Debian's docker-registry and busybox-static. An implementation that is
not installed is skipped, saying so.
Usage: python bench/mpi.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tests/support

from support.cluster import Cluster, LocalRegistry, have_prerequisites
from support.mpi_image import build_ring, push_ring_image
from support.netns_cluster import NetnsCluster

WORKFLOW = """
version: v4
jobs:
  ring:
    image: {{uri: "{image}"}}
    command: [/opt/ring]
    env: [{env}]
    multinode: {{nodes: 2, procs-per-node: 2, implementation: {implementation}}}
"""


@dataclass(frozen=True)
class Implementation:
    """One MPI implementation: its name in workflows, its launcher and how each transport is
    chosen (environment variables, passed through ``env``)."""

    name: str
    launcher: list[str]
    #: the job's env in Fuzzball (what the containers on one machine need)
    job_env: str
    tcp_env: tuple[str, ...]
    shared_memory_env: tuple[str, ...]
    #: the launcher's own environment here, beyond this process's
    launcher_env: tuple[tuple[str, str], ...] = ()


IMPLEMENTATIONS = [
    # both "nodes" are this machine: UCX would reach across the containers through shared
    # memory, which their namespaces keep apart; between real nodes it picks the network
    Implementation(
        "mpich",
        ["mpiexec.mpich", "-n", "4"],
        '"UCX_TLS=tcp,self"',
        ("UCX_TLS=tcp,self",),
        (),
    ),
    Implementation(
        "openmpi",
        ["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "-np", "4"],
        '"PATH=/usr/bin:/bin"',
        ("OMPI_MCA_btl=tcp,self",),
        ("OMPI_MCA_btl=vader,self",),
        # this machine has libmunge: PMIx would try munged's socket with growing pauses
        # (2 s in all) before its native authentication; the containers have no munge
        (("PMIX_MCA_psec", "native"),),
    ),
]


def through_fuzzball(cluster: Cluster, image: str, mpi: Implementation, runs: int) -> float:
    """Median submission-to-FINISHED seconds of the 2x2 ring (one warm-up run first)."""
    orchestrate = cluster.orchestrate
    specification = WORKFLOW.format(image=image, env=mpi.job_env, implementation=mpi.name)
    warm_up = orchestrate.wait_for(orchestrate.start_workflow(specification), timeout=120)
    assert warm_up.status == "FINISHED", [(s.name, s.message) for s in warm_up.stages]
    samples = []
    for _ in range(runs):
        began = time.perf_counter()
        view = orchestrate.wait_for(orchestrate.start_workflow(specification), timeout=120)
        samples.append(time.perf_counter() - began)
        assert view.status == "FINISHED", [(s.name, s.message) for s in view.stages]
    return statistics.median(samples)


def through_launcher(program: Path, mpi: Implementation, runs: int, env: tuple[str, ...]) -> float:
    """Median seconds of the implementation's own launcher starting 4 ranks here (Hydra
    ends MPICH's ring with a bad-termination notice because it skips MPI_Finalize; the time
    to get there is what is compared)."""
    samples = []
    for _ in range(runs + 1):
        began = time.perf_counter()
        subprocess.run(
            [*mpi.launcher, "env", *env, str(program)],
            capture_output=True,
            timeout=60,
            check=False,
            env={**os.environ, **dict(mpi.launcher_env)},
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
    figures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="fuzzball-bench-mpi-") as scratch:
        directory = Path(scratch)
        programs = {}
        for mpi in IMPLEMENTATIONS:
            program = build_ring(directory, mpi.name)
            if program is None or shutil.which(mpi.launcher[0]) is None:
                figures.append(f"{mpi.name}: not installed here, skipped")
            else:
                programs[mpi.name] = program
        if not programs:
            sys.exit("neither MPICH nor Open MPI is installed")
        registry = LocalRegistry(directory / "registry")
        ours: dict[str, float] = {}
        cluster: NetnsCluster | None = None
        try:
            images = {
                name: push_ring_image(registry.url, program, name)
                for name, program in programs.items()
            }
            cluster = NetnsCluster(directory / "cluster", registry, agents=2, cores=2)
            assert cluster.cluster is not None
            for mpi in IMPLEMENTATIONS:
                if mpi.name in images:
                    ours[mpi.name] = through_fuzzball(
                        cluster.cluster, images[mpi.name], mpi, args.runs
                    )
        finally:
            if cluster is not None:
                cluster.close()
            registry.stop()
        for mpi in IMPLEMENTATIONS:
            if mpi.name not in programs:
                continue
            program = programs[mpi.name]
            launcher = " ".join(mpi.launcher[:1] + mpi.launcher[-2:])
            tcp = through_launcher(program, mpi, args.runs, mpi.tcp_env)
            shared = through_launcher(program, mpi, args.runs, mpi.shared_memory_env)
            fuzzball = ours[mpi.name]
            figures += [
                f"{mpi.name}: 2x2 ring through Fuzzball (two agents, containers, TCP):"
                f" {fuzzball * 1000:.0f} ms",
                f"{mpi.name}: same program under {launcher} (TCP): {tcp * 1000:.0f} ms",
                f"{mpi.name}: same program under {launcher} (shared memory):"
                f" {shared * 1000:.0f} ms",
                f"{mpi.name}: ratio {fuzzball / tcp:.2f}x its own launcher's time on TCP",
            ]
    print("\n".join(figures))


if __name__ == "__main__":
    main()
