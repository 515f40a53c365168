"""Jobs' networks through the whole system, on a two-node cluster whose agents each run in a
network namespace of their own (``netns_cluster``): isolated jobs do not reach their node's
ports, exposed ports are reachable from elsewhere, the 2x2 MPI ring crosses the nodes' real
interfaces, and a job reaches a service on the other node by its name."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.cluster import LocalRegistry
from support.mpi_image import RING_OUTPUT, mpi_workflow
from support.netns_cluster import NetnsCluster
from support.netns_tools import Listener, entered, read_from

from fuzzball_core.vocabulary import Status

pytestmark = pytest.mark.root


@pytest.fixture(scope="module")
def netns_cluster(
    tmp_path_factory: pytest.TempPathFactory, local_registry: LocalRegistry
) -> Iterator[NetnsCluster]:
    """Two agents of 2 cores each (a two-node job must span both), node-i annotated
    ``e2e/node=i``, each in its own network namespace on a bridge."""
    running = NetnsCluster(
        tmp_path_factory.mktemp("netns-cluster"),
        local_registry,
        agents=2,
        cores=2,
        memory="2GiB",
        annotations_per_node=True,
    )
    yield running
    running.close()


#: a job's ``network`` of its own on its node (behind the node's job bridge)
ISOLATED = "    network: {isolated: true}\n"


def job(name: str, command: str, *, node: int, extra: str = "") -> str:
    """A v4 job pinned to node ``node`` running ``sh -c command``."""
    return f"""
  {name}:
    image: {{uri: docker://alpine:latest}}
    command: [/bin/sh, -c, {command!r}]
    resource: {{cpu: {{cores: 1}}, memory: {{size: 64MiB}}, annotations: {{e2e/node: "{node}"}}}}
{extra}"""


def run_jobs(netns_cluster: NetnsCluster, jobs: str, services: str = "") -> tuple[str, str]:
    """Run a workflow of ``jobs`` (and ``services``) to its end: (status, logs and, after
    them, each stage's message)."""
    orchestrate = netns_cluster.orchestrate
    text = "version: v4\n" + (f"services:{services}" if services else "") + f"jobs:{jobs}"
    workflow_id = orchestrate.start_workflow(text)
    view = orchestrate.wait_for(workflow_id, timeout=120)
    messages = "".join(f"\n{stage.name}: {stage.message}" for stage in view.stages)
    return view.status, orchestrate.logs(workflow_id) + messages


def test_an_isolated_job_cannot_reach_a_port_listening_on_its_node(
    netns_cluster: NetnsCluster,
) -> None:
    with entered(netns_cluster.node_namespace("node-1")):
        listener = Listener()
    address = netns_cluster.node_address("node-1")
    try:
        probe = f"nc -w 3 {address} {listener.port} </dev/null; echo connected=$?"
        status, logs = run_jobs(
            netns_cluster,
            job("on-the-node-network", probe, node=1)
            + job("isolated", probe, node=1, extra=ISOLATED),
        )
    finally:
        listener.close()
    assert status == Status.FINISHED
    # the node's network reaches the port (and proves it listens); the isolated job does not
    assert logs.count("from-the-node") == 1
    assert sorted(line for line in logs.splitlines() if line.startswith("connected=")) == [
        "connected=0",
        "connected=1",
    ]


def test_an_exposed_port_is_reachable_from_another_network_namespace(
    netns_cluster: NetnsCluster,
) -> None:
    orchestrate = netns_cluster.orchestrate
    serve = "nc -l -p 18081 -e echo from-the-job"
    workflow_id = orchestrate.start_workflow(
        "version: v4\njobs:"
        + job(
            "server",
            serve,
            node=1,
            extra="    network: {isolated: true, expose-tcp: [18081]}\n",
        )
    )
    # this test's own namespace is another machine on the nodes' bridge
    answer = read_from(netns_cluster.node_address("node-1"), 18081, timeout=60)
    view = orchestrate.wait_for(workflow_id, timeout=60)
    assert answer == b"from-the-job\n"
    assert view.status == Status.FINISHED


def test_the_mpi_ring_runs_across_nodes_in_their_own_namespaces(
    netns_cluster: NetnsCluster, mpi_image: str
) -> None:
    orchestrate = netns_cluster.orchestrate
    workflow_id = orchestrate.start_workflow(mpi_workflow(mpi_image, "[/opt/ring]"))

    view = orchestrate.wait_for(workflow_id, timeout=180)

    logs = orchestrate.logs(workflow_id, "jobs.ring")
    assert view.status == Status.FINISHED, ([(s.name, s.message) for s in view.stages], logs)
    assert sorted(logs.splitlines()) == RING_OUTPUT


def test_mpi_ranks_send_over_the_nodes_interface_not_the_job_bridge(
    netns_cluster: NetnsCluster, mpi_image: str
) -> None:
    # an isolated job leaves its node a job bridge, whose address is the same on every node
    status, _ = run_jobs(netns_cluster, job("isolated", "true", node=1, extra=ISOLATED))
    assert status == Status.FINISHED
    orchestrate = netns_cluster.orchestrate
    show = '[/bin/sh, -c, "env | grep -E ^UCX_NET_DEVICES="]'
    workflow_id = orchestrate.start_workflow(mpi_workflow(mpi_image, show))

    view = orchestrate.wait_for(workflow_id, timeout=180)

    assert view.status == Status.FINISHED
    # one line per rank: both nodes' ranks use the interface on the nodes' shared network
    assert orchestrate.logs(workflow_id, "jobs.ring").splitlines() == ["UCX_NET_DEVICES=eth0"] * 4


def call_greeter(netns_cluster: NetnsCluster, *, on: int, caller: int, isolated: bool) -> str:
    """Run a service ``greeter`` (declaring its port) on node ``on`` and a job calling it by
    name from node ``caller``: the logs, after checking that the workflow finished."""
    greeter = f"""
  greeter:
    image: {{uri: docker://alpine:latest}}
    command: [/bin/busybox, nc, -ll, -p, "18082", -e, echo, hello-from-greeter]
    resource: {{cpu: {{cores: 1}}, memory: {{size: 64MiB}}, annotations: {{e2e/node: "{on}"}}}}
    network: {{ports: [{{name: greet, port: 18082}}]}}
    readiness-probe: {{tcp-socket: {{port: 18082}}, period-seconds: 1}}
"""
    network = ISOLATED if isolated else ""
    job_text = job(
        "caller",
        "nc -w 5 greeter 18082 </dev/null && grep greeter /etc/hosts",
        node=caller,
        extra="    depends-on: [{name: greeter, status: RUNNING}]\n" + network,
    )
    status, logs = run_jobs(netns_cluster, job_text, services=greeter)
    assert status == Status.FINISHED, logs
    return logs


def test_a_job_reaches_a_service_on_the_other_node_by_name(netns_cluster: NetnsCluster) -> None:
    logs = call_greeter(netns_cluster, on=2, caller=1, isolated=False)
    assert "hello-from-greeter" in logs
    assert f"{netns_cluster.node_address('node-2')}\tgreeter" in logs


def test_an_isolated_job_reaches_a_service_on_its_own_node_by_name(
    netns_cluster: NetnsCluster,
) -> None:
    logs = call_greeter(netns_cluster, on=1, caller=1, isolated=True)
    assert "hello-from-greeter" in logs
