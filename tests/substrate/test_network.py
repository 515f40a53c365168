"""Which network a job's container gets, which names it resolves, and the address the node
registers (``fuzzball_core.substrate.network``)."""

from __future__ import annotations

import json

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.spec.models import Job, Service
from fuzzball_core.substrate.drivers.base import RunRequest
from fuzzball_core.substrate.network import NodeNetwork, host_names, node_address
from fuzzball_runtime.network import IsolatedNetwork

IMAGE = {"uri": "docker://alpine:latest"}


def job(**fields: object) -> Job:
    return Job.model_validate({"image": IMAGE, "command": ["true"], **fields})


def test_an_isolated_job_gets_the_node_subnet_and_its_exposed_ports() -> None:
    network = NodeNetwork(job_subnet="10.9.8.0/24")
    wanted = job(network={"isolated": True, "expose-tcp": [8080], "expose-udp": [53]})
    assert network.isolation(wanted) == IsolatedNetwork("10.9.8.0/24", (8080,), (53,))


def test_a_job_not_isolated_keeps_the_node_network() -> None:
    assert NodeNetwork().isolation(job(network={"expose-tcp": [8080]})) is None
    assert NodeNetwork().isolation(job()) is None


def test_a_service_keeps_the_node_network() -> None:
    service = Service.model_validate({"image": IMAGE, "command": ["true"]})
    assert NodeNetwork().isolation(service) is None


def test_services_are_named_in_hosts_also_as_dns_labels() -> None:
    hosts = NodeNetwork.hosts({"db": "198.51.100.7", "My_Cache": "198.51.100.8"})
    assert hosts == {"db": "198.51.100.7", "My_Cache": "198.51.100.8", "my-cache": "198.51.100.8"}


def test_a_name_that_is_a_dns_label_is_listed_once() -> None:
    assert host_names("web-1") == ["web-1"]


def test_the_configured_node_address_wins() -> None:
    assert node_address("198.51.100.9", "127.0.0.1:50051") == "198.51.100.9"


def test_without_configuration_the_node_address_is_its_route_to_orchestrate() -> None:
    assert node_address("", "127.0.0.1:50051") == "127.0.0.1"


def test_an_unresolvable_orchestrate_leaves_the_node_address_unknown() -> None:
    assert node_address("", "no-such-host.invalid:50051") == ""


def test_an_assignment_hands_its_hosts_to_the_run() -> None:
    assignment = node_pb2.Assignment(
        run_id=1,
        workflow_id="wf",
        stage_name="jobs.client",
        job_json=json.dumps({"image": IMAGE, "command": ["true"]}),
        hosts={"db": "198.51.100.7"},
    )
    assert RunRequest.from_assignment(assignment).hosts == {"db": "198.51.100.7"}


def test_a_service_declared_ports_are_open_to_isolated_jobs_of_its_node() -> None:
    service = Service.model_validate(
        {
            "image": IMAGE,
            "command": ["true"],
            "network": {
                "ports": [
                    {"name": "web", "port": 8080},
                    {"name": "dns", "port": 53, "protocol": "udp"},
                ]
            },
        }
    )
    assert NodeNetwork().node_ports(service) == ("tcp/8080", "udp/53")


def test_an_isolated_job_opens_no_port_of_its_node() -> None:
    isolated = job(network={"isolated": True, "expose-tcp": [8080]})
    assert NodeNetwork().node_ports(isolated) == ()
