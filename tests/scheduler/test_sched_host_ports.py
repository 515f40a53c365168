"""Host ports as a scheduler resource: a port is held on a node while the job holding it runs."""

import pytest
from support.scheduler_cluster import cluster, job, node, placed_on

from fuzzball_core.errors import InvalidArgument

WEB = frozenset({"tcp/8080"})


def test_two_jobs_with_the_same_host_port_land_on_different_nodes():
    scheduler = cluster(node("a"), node("b"))
    result = scheduler.schedule([job("s1", host_ports=WEB), job("s2", host_ports=WEB)], now=0)
    assert {placed_on(result, "s1"), placed_on(result, "s2")} == {("a",), ("b",)}


def test_job_needing_a_port_a_running_job_holds_waits_naming_the_port():
    scheduler = cluster(node("only"))
    scheduler.schedule([job("s1", host_ports=WEB)], now=0)
    result = scheduler.schedule([job("s2", host_ports=WEB)], now=0)
    assert placed_on(result, "s2") is None
    assert dict(result.diagnoses["s2"].groups) == {"host port tcp/8080 in use": 1}


def test_job_without_ports_still_shares_a_node_with_one_holding_ports():
    scheduler = cluster(node("only"))
    scheduler.schedule([job("s1", host_ports=WEB)], now=0)
    result = scheduler.schedule([job("plain")], now=0)
    assert placed_on(result, "plain") == ("only",)


def test_released_job_frees_its_host_ports():
    scheduler = cluster(node("only"))
    scheduler.schedule([job("s1", host_ports=WEB)], now=0)
    scheduler.release("s1")
    result = scheduler.schedule([job("s2", host_ports=WEB)], now=0)
    assert placed_on(result, "s2") == ("only",)


def test_the_same_port_number_over_tcp_and_udp_does_not_conflict():
    scheduler = cluster(node("only"))
    scheduler.schedule([job("tcp", host_ports=frozenset({"tcp/53"}))], now=0)
    result = scheduler.schedule([job("udp", host_ports=frozenset({"udp/53"}))], now=0)
    assert placed_on(result, "udp") == ("only",)


def test_multinode_job_holds_its_ports_on_each_of_its_nodes():
    scheduler = cluster(node("a"), node("b"), node("c"))
    scheduler.schedule([job("ring", nodes=2, host_ports=WEB)], now=0)
    result = scheduler.schedule([job("s", host_ports=WEB)], now=0)
    held = set(scheduler.node_usage("a").host_ports) | set(scheduler.node_usage("b").host_ports)
    assert held == {"tcp/8080"}
    assert placed_on(result, "s") == ("c",)


def test_allocated_job_holds_its_ports():
    scheduler = cluster(node("only"))
    scheduler.allocate(job("running", host_ports=WEB), ["only"])
    assert dict(scheduler.node_usage("only").host_ports) == {"tcp/8080": "running"}


def test_host_ports_other_than_tcp_or_udp_port_are_refused():
    with pytest.raises(InvalidArgument, match="host ports are tcp/PORT or udp/PORT"):
        job("j", host_ports=frozenset({"sctp/80"}))
