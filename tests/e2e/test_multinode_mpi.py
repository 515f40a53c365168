"""Multinode MPI jobs through the whole system: real MPICH ranks in containers on two agents,
wired up through each node's PMI service and barriers relayed by Orchestrate.

The image is the ``mpi_image`` fixture's (``tests/e2e/conftest.py``, built by ``mpi_image``):
``tests/fixtures/mpi/ring.c`` and what it needs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.cluster import Cluster, LocalRegistry
from support.mpi_image import RING_OUTPUT, mpi_workflow

pytestmark = pytest.mark.root


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


def test_mpich_ranks_on_two_nodes_reduce_together(mpi_cluster: Cluster, mpi_image: str) -> None:
    orchestrate = mpi_cluster.orchestrate
    workflow_id = orchestrate.start_workflow(mpi_workflow(mpi_image, "[/opt/ring]"))

    view = orchestrate.wait_for(workflow_id, timeout=180)

    assert view.status == "FINISHED", [(s.name, s.message) for s in view.stages]
    lines = sorted(orchestrate.logs(workflow_id, "jobs.ring").splitlines())
    assert lines == RING_OUTPUT


def test_a_failing_rank_fails_the_job_and_stops_the_other_node(
    mpi_cluster: Cluster, mpi_image: str
) -> None:
    # rank 3 fails before MPI starts; ranks 0-2 would wait for it in MPI_Init forever
    command = '[/bin/sh, -c, "if [ $PMI_RANK = 3 ]; then exit 5; fi; exec /opt/ring"]'
    orchestrate = mpi_cluster.orchestrate
    workflow_id = orchestrate.start_workflow(mpi_workflow(mpi_image, command))

    view = orchestrate.wait_for(workflow_id, timeout=180)

    assert view.status == "FAILED"
    (stage,) = [s for s in view.stages if s.name == "jobs.ring"]
    assert stage.message == "exited with code 5"
    assert "rank 3 exited with code 5" in orchestrate.logs(workflow_id, "jobs.ring")


def test_ranks_find_the_nodes_topology_bound_in_for_hwloc(
    mpi_cluster: Cluster, mpi_image: str
) -> None:
    # each rank says whether the file hwloc is pointed at is there, then wires up through it
    command = (
        '[/bin/sh, -c, "test -s \\"$HWLOC_XMLFILE\\" &&'
        ' echo topology for rank $PMI_RANK at $HWLOC_XMLFILE; exec /opt/ring"]'
    )
    orchestrate = mpi_cluster.orchestrate
    workflow_id = orchestrate.start_workflow(mpi_workflow(mpi_image, command))

    view = orchestrate.wait_for(workflow_id, timeout=180)

    assert view.status == "FINISHED", [(s.name, s.message) for s in view.stages]
    lines = sorted(orchestrate.logs(workflow_id, "jobs.ring").splitlines())
    assert lines == sorted(
        RING_OUTPUT
        + [f"topology for rank {rank} at /.fuzzball-topology/topology.xml" for rank in range(4)]
    )
