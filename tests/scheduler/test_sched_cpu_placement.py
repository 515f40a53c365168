"""Which cores a pinned job gets: core ids, socket and NUMA affinity, sockets, threads."""

import pytest
from support.scheduler_cluster import cluster, cpus_of, job, node, pinned_node, placed_on, topology

from fuzzball_core.errors import InvalidArgument
from fuzzball_core.scheduling import (
    CpuAffinity,
    CpuCore,
    CpuPinning,
    NodeInfo,
    ReasonCode,
    Resources,
)

CORE = CpuPinning(CpuAffinity.CORE)
SOCKET = CpuPinning(CpuAffinity.SOCKET)
NUMA = CpuPinning(CpuAffinity.NUMA)


def test_pinned_job_is_given_the_logical_cpus_of_its_cores():
    scheduler = cluster(pinned_node("n", topology(cores_per_numa=4)))
    result = scheduler.schedule([job("j", cores=2, cpu=CORE)], now=0)
    assert cpus_of(result, "j", "n") == (0, 1)


def test_unpinned_job_is_given_no_cpus():
    scheduler = cluster(pinned_node("n", topology(cores_per_numa=4)))
    result = scheduler.schedule([job("j", cores=2)], now=0)
    assert placed_on(result, "j") == ("n",)
    assert dict(result.placements[0].cpus) == {}


def test_two_pinned_jobs_never_share_a_core():
    scheduler = cluster(pinned_node("n", topology(cores_per_numa=4)))
    result = scheduler.schedule([job("a", cores=2, cpu=CORE), job("b", cores=2, cpu=CORE)], now=0)
    assert set(cpus_of(result, "a", "n")).isdisjoint(cpus_of(result, "b", "n"))


def test_pinned_job_waits_when_free_cores_by_count_are_not_free_by_id():
    # 8 logical CPUs by count, but only 4 cores: after 3 are pinned one core is left
    scheduler = cluster(pinned_node("n", topology(cores_per_numa=4, threads=2)))
    scheduler.schedule([job("a", cores=3, cpu=CORE)], now=0)
    result = scheduler.schedule([job("b", cores=2, cpu=CORE)], now=0)
    assert placed_on(result, "b") is None
    assert dict(result.diagnoses["b"].groups) == {"no free cores for core affinity": 1}


def test_threads_put_every_hardware_thread_of_the_cores_in_the_cpuset():
    scheduler = cluster(pinned_node("n", topology(cores_per_numa=4, threads=2)))
    result = scheduler.schedule([job("j", cores=2, cpu=CpuPinning(threads=True))], now=0)
    assert cpus_of(result, "j", "n") == (0, 1, 4, 5)


def test_without_threads_only_the_first_thread_of_each_core_is_given():
    scheduler = cluster(pinned_node("n", topology(cores_per_numa=4, threads=2)))
    result = scheduler.schedule([job("j", cores=2, cpu=CORE)], now=0)
    assert cpus_of(result, "j", "n") == (0, 1)


def test_socket_affinity_takes_every_core_from_one_socket():
    scheduler = cluster(pinned_node("n", topology(sockets=2, cores_per_numa=4)))
    scheduler.schedule([job("small", cores=1, cpu=CORE)], now=0)  # core 0, socket 0
    result = scheduler.schedule([job("j", cores=4, cpu=SOCKET)], now=0)
    assert cpus_of(result, "j", "n") == (4, 5, 6, 7)


def test_socket_affinity_waits_when_no_socket_has_enough_free_cores():
    scheduler = cluster(pinned_node("n", topology(sockets=2, cores_per_numa=4)))
    scheduler.allocate(job("a", cores=1, cpu=CORE), ["n"], cpus={"n": [0]})
    scheduler.allocate(job("b", cores=1, cpu=CORE), ["n"], cpus={"n": [4]})
    result = scheduler.schedule([job("j", cores=4, cpu=SOCKET)], now=0)
    assert placed_on(result, "j") is None
    assert dict(result.diagnoses["j"].groups) == {"no free cores for socket affinity": 1}


def test_core_affinity_spans_sockets_when_no_socket_holds_the_job():
    scheduler = cluster(pinned_node("n", topology(sockets=2, cores_per_numa=2)))
    result = scheduler.schedule([job("j", cores=3, cpu=CORE)], now=0)
    assert cpus_of(result, "j", "n") == (0, 1, 2)


def test_core_affinity_picks_the_socket_with_the_least_room_that_holds_the_job():
    scheduler = cluster(pinned_node("n", topology(sockets=2, cores_per_numa=4)))
    scheduler.schedule([job("x", cores=1, cpu=CORE)], now=0)  # socket 0 keeps 3 free
    result = scheduler.schedule([job("j", cores=2, cpu=CORE)], now=0)
    assert cpus_of(result, "j", "n") == (1, 2)


def test_numa_affinity_takes_its_cores_from_one_numa_node():
    scheduler = cluster(pinned_node("n", topology(numa_per_socket=2, cores_per_numa=4)))
    scheduler.schedule([job("x", cores=1, cpu=CORE)], now=0)  # NUMA node 0 keeps 3 free
    result = scheduler.schedule([job("j", cores=4, cpu=NUMA)], now=0)
    assert cpus_of(result, "j", "n") == (4, 5, 6, 7)


def test_sockets_spread_the_cores_evenly_over_that_many_sockets():
    scheduler = cluster(pinned_node("n", topology(sockets=2, cores_per_numa=4)))
    result = scheduler.schedule([job("j", cores=4, cpu=CpuPinning(sockets=2))], now=0)
    assert cpus_of(result, "j", "n") == (0, 1, 4, 5)


def test_numa_affinity_with_sockets_takes_each_share_from_one_numa_node_of_its_socket():
    layout = topology(sockets=2, numa_per_socket=2, cores_per_numa=2)
    scheduler = cluster(pinned_node("n", layout))
    scheduler.schedule([job("x", cores=1, cpu=CORE)], now=0)  # core 0: NUMA node 0 keeps 1
    result = scheduler.schedule([job("j", cores=4, cpu=CpuPinning("numa", sockets=2))], now=0)
    assert cpus_of(result, "j", "n") == (2, 3, 4, 5)


def test_pinned_job_never_goes_to_a_node_without_a_cpu_topology():
    scheduler = cluster(node("plain", cores=64), pinned_node("laid-out", topology()))
    result = scheduler.schedule([job("j", cores=2, cpu=CORE)], now=0)
    assert placed_on(result, "j") == ("laid-out",)


def test_released_pinned_job_gives_its_cores_back():
    scheduler = cluster(pinned_node("n", topology(cores_per_numa=2)))
    scheduler.schedule([job("a", cores=2, cpu=CORE)], now=0)
    scheduler.release("a")
    result = scheduler.schedule([job("b", cores=2, cpu=CORE)], now=0)
    assert cpus_of(result, "b", "n") == (0, 1)


def test_node_usage_names_the_cpus_each_pinned_job_holds():
    scheduler = cluster(pinned_node("n", topology(cores_per_numa=4)))
    scheduler.schedule([job("a", cores=2, cpu=CORE), job("plain")], now=0)
    assert dict(scheduler.node_usage("n").pinned_cpus) == {"a": (0, 1)}


def test_allocated_job_keeps_the_cpus_it_was_given():
    scheduler = cluster(pinned_node("n", topology(cores_per_numa=4)))
    scheduler.allocate(job("running", cores=2, cpu=CORE), ["n"], cpus={"n": [2, 3]})
    result = scheduler.schedule([job("new", cores=2, cpu=CORE)], now=0)
    assert cpus_of(result, "new", "n") == (0, 1)


def test_a_node_registering_again_keeps_its_pinned_cores_taken():
    layout = topology(cores_per_numa=4)
    scheduler = cluster(pinned_node("n", layout))
    scheduler.schedule([job("a", cores=3, cpu=CORE)], now=0)
    scheduler.upsert_node(pinned_node("n", layout))
    result = scheduler.schedule([job("b", cores=1, cpu=CORE)], now=0)
    assert cpus_of(result, "b", "n") == (3,)


def test_exclusive_pinned_job_is_given_every_core_of_its_node():
    scheduler = cluster(pinned_node("n", topology(cores_per_numa=4)))
    result = scheduler.schedule([job("whole", cores=1, exclusive=True, cpu=CORE)], now=0)
    assert cpus_of(result, "whole", "n") == (0, 1, 2, 3)


def test_layout_no_node_has_enough_sockets_for_is_infeasible_naming_sockets():
    scheduler = cluster(pinned_node("n", topology(sockets=2)))
    diagnosis = scheduler.check_feasible(job("j", cores=4, cpu=CpuPinning(sockets=4)))
    assert diagnosis.reason is ReasonCode.INFEASIBLE
    assert diagnosis.resource_field == "cpu.sockets"
    assert "no node can lay its cores out so (the largest has 2 sockets" in diagnosis.message


def test_numa_layout_larger_than_any_numa_node_is_infeasible_naming_affinity():
    scheduler = cluster(pinned_node("n", topology(numa_per_socket=2, cores_per_numa=4)))
    diagnosis = scheduler.check_feasible(job("j", cores=6, cpu=NUMA))
    assert diagnosis.resource_field == "cpu.affinity"
    assert diagnosis.message.startswith("job needs 6 cores, 1 GiB memory pinned (numa affinity)")


def test_layout_on_a_cluster_without_topologies_is_infeasible_naming_the_field():
    scheduler = cluster(node("plain", cores=64))
    diagnosis = scheduler.check_feasible(job("j", cores=2, cpu=CpuPinning(threads=True)))
    assert diagnosis.resource_field == "cpu.threads"
    assert "no node reports its CPU topology" in diagnosis.message


def test_layout_some_node_can_give_is_feasible():
    scheduler = cluster(node("plain"), pinned_node("n", topology(sockets=2)))
    assert scheduler.check_feasible(job("j", cores=4, cpu=SOCKET)) is None


def test_too_little_memory_is_not_blamed_on_the_cpu_layout():
    scheduler = cluster(pinned_node("n", topology(), memory_gib=4))
    diagnosis = scheduler.check_feasible(job("j", cores=2, memory_gib=64, cpu=CORE))
    assert diagnosis.resource_field is None


def test_cpu_topology_must_number_its_cores_from_zero():
    with pytest.raises(InvalidArgument, match="number its cores from 0"):
        NodeInfo("n", Resources(2), cpu_topology=(CpuCore(1, 0, 0, (1,)),))


def test_unknown_affinity_is_refused_naming_the_choices():
    with pytest.raises(InvalidArgument, match="one of core, socket, numa"):
        CpuPinning("board")


def test_nodes_of_one_size_with_different_topologies_both_take_work():
    one_socket = pinned_node("flat", topology(cores_per_numa=4))
    two_sockets = pinned_node("split", topology(sockets=2, cores_per_numa=2))
    scheduler = cluster(one_socket, two_sockets)
    result = scheduler.schedule([job("a", cores=4, cpu=CORE), job("b", cores=4, cpu=CORE)], now=0)
    assert {placed_on(result, "a"), placed_on(result, "b")} == {("flat",), ("split",)}
