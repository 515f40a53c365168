"""Multinode MPI jobs through the whole system: real MPICH ranks in containers on two agents,
wired up through each node's PMI service and barriers relayed by Orchestrate.

The image is ``mpi_image``'s: ``tests/fixtures/mpi/ring.c`` and what it needs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cluster import Cluster, LocalRegistry
from mpi_image import build_ring, push_ring_image

pytestmark = pytest.mark.root


@pytest.fixture(scope="module")
def mpi_image(local_registry: LocalRegistry, tmp_path_factory: pytest.TempPathFactory) -> str:
    """``docker://mpi-ring:latest`` holding ``/opt/ring`` and everything it needs."""
    program = build_ring(tmp_path_factory.mktemp("mpi"))
    if program is None:
        pytest.skip("MPICH is not installed (apt-get install mpich libmpich-dev)")
    return push_ring_image(local_registry.url, program)


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
