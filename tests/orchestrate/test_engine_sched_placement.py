"""What the engine asks the scheduler and tells the node: pinned cores, host ports, exclusive
nodes, and the layouts refused at submission naming their field."""

from __future__ import annotations

import pytest

from fuzzball_core.errors import InvalidArgument
from fuzzball_core.orchestrate.engine import Engine
from fuzzball_core.scheduling import CpuCore, Resources
from fuzzball_plugins.schedulers.default import DefaultScheduler

#: one socket of four single-threaded cores: logical CPUs 0-3
FOUR_CORES = tuple(CpuCore(i, 0, 0, (i,)) for i in range(4))

PINNED = """
version: v1
jobs:
  pinned:
    image: {uri: docker://alpine:latest}
    command: [sleep, "60"]
    resource: {cpu: {cores: 2, affinity: CORE}}
"""

TWO_WEB_SERVICES = """
version: v1
services:
  web-a:
    image: {uri: docker://alpine:latest}
    command: [sleep, "600"]
    network: {ports: [{name: http, port: 8080}]}
  web-b:
    image: {uri: docker://alpine:latest}
    command: [sleep, "600"]
    network: {ports: [{name: http, port: 8080}]}
jobs:
  client:
    image: {uri: docker://alpine:latest}
    command: ["true"]
    depends-on: [{name: web-a, status: RUNNING}, {name: web-b, status: RUNNING}]
"""

EXCLUSIVE_THEN_SMALL = """
version: v1
jobs:
  whole:
    image: {uri: docker://alpine:latest}
    command: [sleep, "60"]
    resource: {cpu: {cores: 1}, exclusive: true}
  small:
    image: {uri: docker://alpine:latest}
    command: ["true"]
    resource: {cpu: {cores: 1}}
"""


def laid_out_node(harness, name: str = "n1") -> str:
    return harness.engine.register_node(name, Resources(4, 8 << 30), {}, cpu_topology=FOUR_CORES)


def test_pinned_job_assignment_names_the_cpus_of_its_node(harness):
    node = laid_out_node(harness)
    harness.submit(PINNED)
    (assignment,) = harness.assignments()
    assert dict(assignment.cpus) == {node: "0-1"}


def test_unpinned_job_assignment_names_no_cpus(harness):
    laid_out_node(harness)
    harness.submit(PINNED.replace(", affinity: CORE", ""))
    (assignment,) = harness.assignments()
    assert dict(assignment.cpus) == {}


def test_restarted_engine_keeps_the_cores_a_running_pinned_job_holds(harness):
    node = laid_out_node(harness)
    harness.submit(PINNED)
    (first,) = harness.assignments()
    harness.start(node, first.run_id)
    harness.engine.step()
    engine = Engine(harness.engine.sessions, DefaultScheduler(), harness.hub, clock=harness.clock)
    engine.recover()
    engine.node_hello(node, [first.run_id])
    harness.service.engine = engine
    harness.engine = engine
    harness.submit(PINNED)
    (second,) = harness.assignments()
    assert dict(second.cpus) == {node: "2-3"}


def test_layout_no_node_can_give_is_refused_at_submission_naming_the_field(harness):
    laid_out_node(harness)
    numa = PINNED.replace("affinity: CORE", "affinity: NUMA, sockets: 2")
    with pytest.raises(InvalidArgument) as excinfo:
        harness.submit(numa)
    assert "jobs.pinned.resource.cpu.sockets" in excinfo.value.message
    assert "the largest has 1 socket, 1 NUMA node, 4 cores" in excinfo.value.message


def test_layout_on_nodes_without_topology_is_refused_naming_the_field(harness):
    harness.node()
    with pytest.raises(InvalidArgument) as excinfo:
        harness.submit(PINNED)
    assert "jobs.pinned.resource.cpu.affinity" in excinfo.value.message
    assert "no node reports its CPU topology" in excinfo.value.message


def test_two_services_with_the_same_host_port_go_to_different_nodes(harness):
    harness.node("n1")
    harness.node("n2")
    harness.submit(TWO_WEB_SERVICES)
    placed = {
        assignment.stage_name: tuple(assignment.node_ids) for assignment in harness.assignments()
    }
    assert set(placed) == {"services.web-a", "services.web-b"}
    assert placed["services.web-a"] != placed["services.web-b"]


def test_service_waits_while_the_only_node_holds_its_host_port(harness):
    harness.node("n1")
    wf = harness.submit(TWO_WEB_SERVICES)
    (assignment,) = harness.assignments()
    other = "services.web-b" if assignment.stage_name == "services.web-a" else "services.web-a"
    assert harness.stages(wf)[other] == "PENDING"


def test_an_exclusive_job_never_shares_its_node(harness):
    node = harness.node(cores=4)
    harness.submit(EXCLUSIVE_THEN_SMALL)
    (first,) = harness.assignments()
    harness.start(node, first.run_id)
    harness.engine.step()
    assert harness.assignments() == []
    harness.exit(node, first.run_id)
    harness.engine.step()
    (second,) = harness.assignments()
    assert {first.stage_name, second.stage_name} == {"jobs.whole", "jobs.small"}
