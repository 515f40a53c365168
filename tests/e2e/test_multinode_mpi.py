"""Multinode MPI jobs through the whole system: real MPICH ranks in containers on two agents,
wired up through each node's PMI service and barriers relayed by Orchestrate.

The image holds ``tests/fixtures/mpi/ring.c`` built with this machine's MPICH, the shared
libraries it loads (found with ``ldd``) and busybox for ``/bin/sh``."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster import Cluster, LocalRegistry

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "images"))
from oci_pusher import Entry, Pusher, busybox_entries, directory, file, layer, symlink

RING_SOURCE = Path(__file__).resolve().parents[1] / "fixtures" / "mpi" / "ring.c"
#: UCX (MPICH's transport here) loads its transports from this folder at run time
UCX_MODULES = Path("/usr/lib/x86_64-linux-gnu/ucx")

pytestmark = pytest.mark.root


def _library_closure(program: Path) -> list[Path]:
    """Every shared object ``program`` and the UCX modules load, the dynamic loader too."""
    modules = sorted(UCX_MODULES.glob("*.so*")) if UCX_MODULES.is_dir() else []
    found: set[Path] = set(modules)
    for path in [program, *modules]:
        listing = subprocess.run(["ldd", str(path)], capture_output=True, text=True).stdout
        found.update(Path(m) for m in re.findall(r"(/\S+) \(0x", listing))
    return sorted(found)


def _merged_usr_entries(paths: list[Path]) -> list[Entry]:
    """``paths`` laid out as on this merged-/usr machine: each file's content under its own
    name (the soname the loader asks for) in its folder's real location, and /lib, /lib64
    linking into /usr as here."""
    entries: dict[str, Entry] = {}
    for path in paths:
        folder = path.parent.resolve().relative_to("/")
        for parent in [*reversed(folder.parents[:-1]), folder]:
            entries.setdefault(str(parent), directory(str(parent)))
        target = str(folder / path.name)
        entries.setdefault(target, file(target, path.resolve().read_bytes(), mode=0o755))
    for link in ("lib", "lib64"):
        if Path("/", link).is_symlink():
            entries[link] = symlink(link, str(Path("/", link).readlink()))
    return list(entries.values())


@pytest.fixture(scope="module")
def mpi_image(local_registry: LocalRegistry, tmp_path_factory: pytest.TempPathFactory) -> str:
    """``docker://mpi-ring:latest`` holding ``/opt/ring`` and everything it needs."""
    if shutil.which("mpicc") is None:
        pytest.skip("MPICH is not installed (apt-get install mpich libmpich-dev)")
    program = tmp_path_factory.mktemp("mpi") / "ring"
    subprocess.run(["mpicc", "-O2", "-o", str(program), str(RING_SOURCE)], check=True)
    libraries = _merged_usr_entries(_library_closure(program))
    ring = [directory("opt"), file("opt/ring", program.read_bytes(), mode=0o755)]
    pusher = Pusher(local_registry.url)
    try:
        pusher.push_image(
            "library/mpi-ring",
            "latest",
            [layer(busybox_entries()), layer(libraries), layer(ring)],
        )
    finally:
        pusher.close()
    return "docker://mpi-ring:latest"


@pytest.fixture(scope="module")
def mpi_cluster(
    tmp_path_factory: pytest.TempPathFactory, local_registry: LocalRegistry, mpi_image: str
) -> Iterator[Cluster]:
    """Two agents of 2 cores each, so a two-node job must span both."""
    running = Cluster(
        tmp_path_factory.mktemp("mpi-cluster"),
        local_registry.url,
        agents=2,
        cores=2,
        memory="2GiB",
    )
    yield running
    running.close()


def _mpi_workflow(image: str, command: str, *, procs_per_node: int = 2) -> str:
    # Both "nodes" are this one machine: UCX sees the same boot id in both containers and
    # would reach across them through shared memory, which their separate IPC and mount
    # namespaces keep apart; between real nodes it picks the network itself.
    return f"""
version: v4
jobs:
  ring:
    image: {{uri: "{image}"}}
    command: {command}
    env: ["UCX_TLS=tcp,self"]
    resource: {{cpu: {{cores: 2}}, memory: {{size: 256MiB}}}}
    multinode: {{nodes: 2, procs-per-node: {procs_per_node}, implementation: mpich}}
    policy: {{timeout: {{execute: 2m}}}}
"""


def test_mpich_ranks_on_two_nodes_reduce_together(mpi_cluster: Cluster, mpi_image: str) -> None:
    orchestrate = mpi_cluster.orchestrate
    workflow_id = orchestrate.start_workflow(_mpi_workflow(mpi_image, "[/opt/ring]"))

    view = orchestrate.wait_for(workflow_id, timeout=180)

    assert view.status == "FINISHED", [(s.name, s.message) for s in view.stages]
    lines = sorted(orchestrate.logs(workflow_id, "jobs.ring").splitlines())
    assert lines == [
        "rank 0 of 4 on ring-0 sum 10",
        "rank 1 of 4 on ring-0 sum 10",
        "rank 2 of 4 on ring-1 sum 10",
        "rank 3 of 4 on ring-1 sum 10",
    ]


def test_a_failing_rank_fails_the_job_and_stops_the_other_node(
    mpi_cluster: Cluster, mpi_image: str
) -> None:
    # rank 3 fails before MPI starts; ranks 0-2 would wait for it in MPI_Init forever
    command = '[/bin/sh, -c, "if [ $PMI_RANK = 3 ]; then exit 5; fi; exec /opt/ring"]'
    orchestrate = mpi_cluster.orchestrate
    workflow_id = orchestrate.start_workflow(_mpi_workflow(mpi_image, command))

    view = orchestrate.wait_for(workflow_id, timeout=180)

    assert view.status == "FAILED"
    (stage,) = [s for s in view.stages if s.name == "jobs.ring"]
    assert stage.message == "exited with code 5"
    assert "rank 3 exited with code 5" in orchestrate.logs(workflow_id, "jobs.ring")
