"""Name resolution in the engine: a job's assignment names the workflow's placed services
with the address of their node, so the node can write them into the job's /etc/hosts."""

import pytest

from fuzzball_core.errors import InvalidArgument
from fuzzball_core.scheduling import Resources

SERVICE_AND_CLIENT = """
version: v4
services:
  db:
    image: {uri: docker://alpine:latest}
    command: [sleep, "600"]
jobs:
  client:
    image: {uri: docker://alpine:latest}
    command: ["true"]
    depends-on: [{name: db, status: RUNNING}]
"""

ISOLATED_MULTINODE = """
version: v4
jobs:
  ring:
    image: {uri: docker://alpine:latest}
    command: ["true"]
    network: {isolated: true}
    multinode: {nodes: 2, implementation: mpich}
"""


def _client_assignment(harness, address: str):
    node = harness.engine.register_node("n1", Resources(4, 8 << 30, {}), {}, address=address)
    harness.submit(SERVICE_AND_CLIENT)
    (service,) = harness.assignments()
    harness.start(node, service.run_id)
    harness.engine.step()
    (client,) = harness.assignments()
    return service, client


def test_a_job_assignment_names_the_running_services_at_their_node_address(harness) -> None:
    _, client = _client_assignment(harness, "198.51.100.7")
    assert dict(client.hosts) == {"db": "198.51.100.7"}


def test_a_service_on_a_node_that_registered_no_address_is_not_named(harness) -> None:
    _, client = _client_assignment(harness, "")
    assert dict(client.hosts) == {}


def test_an_isolated_multinode_job_is_refused_naming_the_field(harness) -> None:
    harness.node("a")
    harness.node("b")
    with pytest.raises(InvalidArgument) as refused:
        harness.submit(ISOLATED_MULTINODE)
    assert [d["field"] for d in refused.value.details] == ["jobs.ring.network.isolated"]
