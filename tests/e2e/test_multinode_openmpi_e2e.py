"""Open MPI and generic multinode jobs across two Substrates, each in its own network
namespace: Open MPI's ``mpirun`` in the first node's container reaches the second through
Substrate (its remote agent), over the nodes' real interfaces; a generic job's processes meet
at ``MASTER_ADDR:MASTER_PORT`` with torchrun's variables."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.cluster import Cluster, LocalRegistry
from support.mpi_image import (
    RENDEZVOUS_PROGRAM,
    RING_OUTPUT,
    build_ring,
    push_rendezvous_image,
    push_ring_image,
)
from support.netns_cluster import NetnsCluster

from fuzzball_core.vocabulary import Status

pytestmark = pytest.mark.root


@pytest.fixture(scope="module")
def netns_cluster(
    tmp_path_factory: pytest.TempPathFactory, local_registry: LocalRegistry
) -> Iterator[NetnsCluster]:
    """Two agents of 2 cores each (a two-node job must span both), each in its own network
    namespace on a bridge."""
    running = NetnsCluster(
        tmp_path_factory.mktemp("openmpi-cluster"),
        local_registry,
        agents=2,
        cores=2,
        memory="2GiB",
    )
    yield running
    running.close()


@pytest.fixture(scope="module")
def ompi_image(local_registry: LocalRegistry, tmp_path_factory: pytest.TempPathFactory) -> str:
    """``docker://ompi-ring:latest``: ring.c built with Open MPI, and Open MPI itself."""
    program = build_ring(tmp_path_factory.mktemp("ompi"), "openmpi")
    if program is None:
        pytest.skip("Open MPI is not installed (apt-get install openmpi-bin libopenmpi-dev)")
    return push_ring_image(local_registry.url, program, "openmpi")


def openmpi_workflow(image: str, command: str) -> str:
    """One job ``ring`` running ``command`` (a YAML list) as 2 ranks on each of 2 nodes."""
    return f"""
version: v4
jobs:
  ring:
    image: {{uri: "{image}"}}
    command: {command}
    env: ["PATH=/usr/bin:/bin"]
    resource: {{cpu: {{cores: 2}}, memory: {{size: 256MiB}}}}
    multinode: {{nodes: 2, procs-per-node: 2, implementation: openmpi}}
    policy: {{timeout: {{execute: 2m}}}}
"""


def test_open_mpi_ranks_on_two_nodes_reduce_together(
    netns_cluster: NetnsCluster, ompi_image: str
) -> None:
    orchestrate = netns_cluster.orchestrate
    workflow_id = orchestrate.start_workflow(openmpi_workflow(ompi_image, "[/opt/ring]"))

    view = orchestrate.wait_for(workflow_id, timeout=180)

    logs = orchestrate.logs(workflow_id, "jobs.ring")
    assert view.status == Status.FINISHED, ([(s.name, s.message) for s in view.stages], logs)
    assert sorted(line for line in logs.splitlines() if line.startswith("rank ")) == RING_OUTPUT


def test_open_mpi_binds_each_rank_to_a_core_of_its_own(
    netns_cluster: NetnsCluster, ompi_image: str
) -> None:
    command = '[/bin/sh, -c, "echo bound $(hostname) $(grep Cpus_allowed_list /proc/self/status)"]'
    orchestrate = netns_cluster.orchestrate
    workflow_id = orchestrate.start_workflow(openmpi_workflow(ompi_image, command))

    view = orchestrate.wait_for(workflow_id, timeout=180)

    assert view.status == Status.FINISHED, [(s.name, s.message) for s in view.stages]
    bound = [line.split() for line in orchestrate.logs(workflow_id, "jobs.ring").splitlines()]
    cpus_by_host: dict[str, list[str]] = {}
    for _, host, _, cpus in (words for words in bound if words[0] == "bound"):
        cpus_by_host.setdefault(host, []).append(cpus)
    assert sorted(cpus_by_host) == ["ring-0", "ring-1"]
    for cpus in cpus_by_host.values():
        # two ranks on the node, each allowed one CPU, not the same one
        assert len(cpus) == 2 and len(set(cpus)) == 2
        assert not any("-" in cpu for cpu in cpus)  # "0-1": the whole machine


def test_a_failing_open_mpi_rank_fails_the_job_on_both_nodes(
    netns_cluster: NetnsCluster, ompi_image: str
) -> None:
    # rank 3 (on the second node) fails before MPI starts; the others wait for it in MPI_Init
    command = '[/bin/sh, -c, "if [ $OMPI_COMM_WORLD_RANK = 3 ]; then exit 5; fi; exec /opt/ring"]'
    orchestrate = netns_cluster.orchestrate
    workflow_id = orchestrate.start_workflow(openmpi_workflow(ompi_image, command))

    view = orchestrate.wait_for(workflow_id, timeout=180)

    assert view.status == Status.FAILED
    (stage,) = [s for s in view.stages if s.name == "jobs.ring"]
    assert stage.message == "exited with code 5"
    # both nodes are free again: a job needing both runs
    again = orchestrate.wait_for(
        orchestrate.start_workflow(openmpi_workflow(ompi_image, "[/opt/ring]")), timeout=180
    )
    assert again.status == Status.FINISHED


@pytest.fixture(scope="module")
def rendezvous_image(
    local_registry: LocalRegistry, tmp_path_factory: pytest.TempPathFactory
) -> str:
    """``docker://rendezvous:latest`` holding ``tests/fixtures/mpi/rendezvous.c``."""
    return push_rendezvous_image(local_registry.url, tmp_path_factory.mktemp("rendezvous"))


def test_a_generic_job_meets_across_nodes_with_torchruns_variables(
    netns_cluster: NetnsCluster, rendezvous_image: str
) -> None:
    orchestrate = netns_cluster.orchestrate
    workflow_id = orchestrate.start_workflow(
        f"""
version: v4
jobs:
  train:
    image: {{uri: "{rendezvous_image}"}}
    command: [{RENDEZVOUS_PROGRAM}]
    resource: {{cpu: {{cores: 2}}, memory: {{size: 256MiB}}}}
    multinode: {{nodes: 2, procs-per-node: 2, implementation: generic}}
    policy: {{timeout: {{execute: 2m}}}}
"""
    )

    view = orchestrate.wait_for(workflow_id, timeout=180)

    logs = orchestrate.logs(workflow_id, "jobs.train")
    assert view.status == Status.FINISHED, ([(s.name, s.message) for s in view.stages], logs)
    (nodes,) = [line for line in logs.splitlines() if line.startswith("nodes ")]
    addresses = nodes.removeprefix("nodes ").split(",")
    assert sorted(addresses) == sorted(netns_cluster.network.addresses)
    # every process reached rank 0 at the first node's address, which heard from all four
    master = addresses[0]
    assert sorted(line for line in logs.splitlines() if line.startswith("rank ")) == [
        f"rank 0 of 4 (node 0, local 0 of 2) met 0,1,2,3 at {master}",
        f"rank 1 of 4 (node 0, local 1 of 2) met 0,1,2,3 at {master}",
        f"rank 2 of 4 (node 1, local 0 of 2) met 0,1,2,3 at {master}",
        f"rank 3 of 4 (node 1, local 1 of 2) met 0,1,2,3 at {master}",
    ]


def test_open_mpi_on_nodes_that_share_an_address_fails_saying_so(
    cluster: Cluster, ompi_image: str
) -> None:
    # the session's plain cluster: both agents in this machine's network, one address
    orchestrate = cluster.orchestrate
    workflow_id = orchestrate.start_workflow(openmpi_workflow(ompi_image, "[/opt/ring]"))

    view = orchestrate.wait_for(workflow_id, timeout=180)

    assert view.status == Status.FAILED
    (stage,) = [s for s in view.stages if s.name == "jobs.ring"]
    assert "the job's nodes share an address" in stage.message
