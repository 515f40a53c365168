"""CPU placement and host ports on a real cluster: Orchestrate, two Substrate agents and real
containers.

Each agent of the cluster offers 2 cores and registers the machine's first 2 logical CPUs as
its topology, so a pinned job's cpuset is observable from inside its container
(``Cpus_allowed_list``); the agents share the machine's network, so the services below only
declare their port and sleep.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
from support.cluster import Cluster

from fuzzball_core.scheduling import format_cpu_list, parse_cpu_list
from fuzzball_core.vocabulary import EventKind

pytestmark = [pytest.mark.root, pytest.mark.slow]

SHOW_CPUS = "grep Cpus_allowed_list /proc/self/status"

PINNED_AND_LOOSE = f"""
version: v1
jobs:
  pinned:
    image: {{uri: docker://alpine:latest}}
    command: [/bin/sh, -c, "{SHOW_CPUS}"]
    resource: {{cpu: {{cores: 1, affinity: CORE}}}}
  loose:
    image: {{uri: docker://alpine:latest}}
    command: [/bin/sh, -c, "{SHOW_CPUS}"]
"""

EXCLUSIVE_PINNED = f"""
version: v1
jobs:
  whole:
    image: {{uri: docker://alpine:latest}}
    command: [/bin/sh, -c, "{SHOW_CPUS}"]
    resource: {{cpu: {{cores: 1, affinity: CORE}}, exclusive: true}}
"""

TWO_WEB_SERVICES = """
version: v1
services:
  web-a:
    image: {uri: docker://alpine:latest}
    command: [/bin/sh, -c, "sleep 600"]
    network: {ports: [{name: http, port: 18080}]}
  web-b:
    image: {uri: docker://alpine:latest}
    command: [/bin/sh, -c, "sleep 600"]
    network: {ports: [{name: http, port: 18080}]}
jobs:
  client:
    image: {uri: docker://alpine:latest}
    command: [/bin/sh, -c, "true"]
    depends-on: [{name: web-a, status: RUNNING}, {name: web-b, status: RUNNING}]
"""


def _cpus_seen(cluster: Cluster, workflow_id: str, stage: str) -> tuple[int, ...]:
    output = cluster.orchestrate.logs(workflow_id, stage)
    _, _, cpus = output.strip().partition(":")
    return parse_cpu_list(cpus)


@pytest.fixture
def two_core_nodes(make_cluster: Callable[..., Cluster]) -> Cluster:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.fail("this test needs a machine with at least 2 logical CPUs")
    return make_cluster(agents=2, cores=2)


def test_job_with_core_affinity_sees_only_its_core(two_core_nodes: Cluster) -> None:
    orchestrate = two_core_nodes.orchestrate
    workflow_id = orchestrate.start_workflow(PINNED_AND_LOOSE, name="cpus")

    view = orchestrate.wait_for(workflow_id, timeout=120)

    assert view.status == "FINISHED", view
    node_cpus = set(sorted(os.sched_getaffinity(0))[:2])
    pinned = _cpus_seen(two_core_nodes, workflow_id, "jobs.pinned")
    assert len(pinned) == 1 and set(pinned) <= node_cpus, pinned


def test_job_without_a_cpu_layout_sees_every_cpu(two_core_nodes: Cluster) -> None:
    orchestrate = two_core_nodes.orchestrate
    workflow_id = orchestrate.start_workflow(PINNED_AND_LOOSE, name="cpus")

    view = orchestrate.wait_for(workflow_id, timeout=120)

    assert view.status == "FINISHED", view
    loose = _cpus_seen(two_core_nodes, workflow_id, "jobs.loose")
    assert format_cpu_list(loose) == format_cpu_list(sorted(os.sched_getaffinity(0)))


def test_exclusive_pinned_job_sees_every_core_of_its_node(two_core_nodes: Cluster) -> None:
    orchestrate = two_core_nodes.orchestrate
    workflow_id = orchestrate.start_workflow(EXCLUSIVE_PINNED, name="whole")

    view = orchestrate.wait_for(workflow_id, timeout=120)

    assert view.status == "FINISHED", view
    node_cpus = tuple(sorted(os.sched_getaffinity(0))[:2])
    assert _cpus_seen(two_core_nodes, workflow_id, "jobs.whole") == node_cpus


def test_two_services_with_the_same_host_port_land_on_different_nodes(
    two_core_nodes: Cluster,
) -> None:
    orchestrate = two_core_nodes.orchestrate
    workflow_id = orchestrate.start_workflow(TWO_WEB_SERVICES, name="ports")

    view = orchestrate.wait_for(workflow_id, timeout=120)

    assert view.status == "FINISHED", view
    scheduled = {
        event.stage_name: event.node_id
        for event in orchestrate.events(workflow_id)
        if event.kind == EventKind.SCHEDULED
    }
    assert scheduled["services.web-a"] != scheduled["services.web-b"]
