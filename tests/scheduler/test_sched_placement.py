"""Where the default scheduler puts a job: resources, exclusivity, annotations, node sets."""

import dataclasses

import pytest
from support.scheduler_cluster import GPU, GiB, cluster, job, node, placed_on

from fuzzball_core.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from fuzzball_core.scheduling import Hold, Scheduler
from fuzzball_plugins.schedulers.default import DefaultScheduler


def test_default_scheduler_is_a_scheduler_driver():
    assert isinstance(DefaultScheduler({}), Scheduler)


def test_unknown_configuration_option_is_refused_by_name():
    with pytest.raises(InvalidArgument, match="unknown option 'backfil'"):
        DefaultScheduler({"backfil": True})


def test_job_goes_to_the_node_with_enough_free_cores():
    scheduler = cluster(node("small", cores=4), node("big", cores=32))
    result = scheduler.schedule([job("j", cores=8)], now=0)
    assert placed_on(result, "j") == ("big",)


def test_job_goes_to_the_node_with_enough_free_memory():
    scheduler = cluster(node("lean", memory_gib=16), node("fat", memory_gib=256))
    result = scheduler.schedule([job("j", memory_gib=100)], now=0)
    assert placed_on(result, "j") == ("fat",)


def test_job_asking_for_gpus_goes_to_a_node_with_free_gpus():
    scheduler = cluster(node("cpu", cores=64), node("gpu", gpus=4))
    result = scheduler.schedule([job("j", gpus=2)], now=0)
    assert placed_on(result, "j") == ("gpu",)


def test_cpu_job_prefers_a_node_without_devices():
    scheduler = cluster(node("gpu", gpus=4), node("cpu"))
    result = scheduler.schedule([job("j")], now=0)
    assert placed_on(result, "j") == ("cpu",)


def test_jobs_pack_onto_the_fullest_node_that_still_fits():
    scheduler = cluster(node("a", cores=16), node("b", cores=16))
    first = scheduler.schedule([job("j1", cores=10)], now=0)
    second = scheduler.schedule([job("j2", cores=6)], now=0)
    assert placed_on(second, "j2") == placed_on(first, "j1")


def test_jobs_spill_to_the_next_class_once_the_preferred_one_fills_and_come_back_later():
    # the pass remembers that the small class is full for the rest of the pass only: a
    # release before the next pass makes it the first choice again
    scheduler = cluster(node("small", cores=4), node("big", cores=32))
    first = scheduler.schedule([job(f"j{i}", cores=2) for i in range(3)], now=0)
    assert [placed_on(first, f"j{i}") for i in range(3)] == [("small",), ("small",), ("big",)]
    scheduler.release("j0")
    second = scheduler.schedule([job("j3", cores=2), job("j4", cores=2)], now=1)
    assert placed_on(second, "j3") == ("small",)
    assert placed_on(second, "j4") == ("big",)


def test_capacity_is_deducted_by_each_placement():
    scheduler = cluster(node("n", cores=16, memory_gib=64, gpus=4))
    scheduler.schedule([job("j", cores=6, memory_gib=20, gpus=3)], now=0)
    usage = scheduler.node_usage("n")
    assert (usage.free_cores, usage.free_memory, dict(usage.free_devices)) == (
        10,
        44 * GiB,
        {GPU: 1},
    )
    assert usage.job_ids == ("j",)


def test_job_larger_than_what_is_left_waits():
    scheduler = cluster(node("n", cores=16))
    result = scheduler.schedule([job("j1", cores=12), job("j2", cores=8, submitted_at=1)], 0)
    assert placed_on(result, "j1") == ("n",)
    assert placed_on(result, "j2") is None
    assert "j2" in result.diagnoses


def test_gpu_job_waits_when_the_gpus_are_taken_even_with_cores_free():
    scheduler = cluster(node("n", cores=64, gpus=2))
    result = scheduler.schedule([job("j1", gpus=2), job("j2", gpus=1, submitted_at=1)], 0)
    assert placed_on(result, "j2") is None


def test_exclusive_job_gets_a_whole_idle_node():
    scheduler = cluster(node("busy"), node("idle"))
    scheduler.schedule([job("small")], now=0)
    result = scheduler.schedule([job("whole", exclusive=True)], now=0)
    assert placed_on(result, "whole") == ("idle",)
    assert scheduler.node_usage("idle").exclusive_job == "whole"


def test_nothing_joins_a_node_running_an_exclusive_job():
    scheduler = cluster(node("n", cores=16))
    scheduler.schedule([job("whole", cores=1, exclusive=True)], now=0)
    result = scheduler.schedule([job("tiny", cores=0, memory_gib=0)], now=0)
    assert result.placements == ()


def test_exclusive_job_waits_while_every_node_runs_something():
    scheduler = cluster(node("a"), node("b"))
    scheduler.schedule([job("x"), job("y", cores=16)], now=0)
    result = scheduler.schedule([job("whole", exclusive=True)], now=0)
    assert result.placements == ()


def test_job_runs_only_on_nodes_with_its_annotations():
    scheduler = cluster(
        node("zone-a", annotations={"zone": "a"}),
        node("zone-b", annotations={"zone": "b", "fabric": "ib"}),
    )
    result = scheduler.schedule([job("j", annotations={"zone": "b"})], now=0)
    assert placed_on(result, "j") == ("zone-b",)


def test_annotation_values_must_be_equal_not_just_present():
    scheduler = cluster(node("n", annotations={"zone": "a"}))
    result = scheduler.schedule([job("j", annotations={"zone": "b"})], now=0)
    assert result.placements == ()


def test_multinode_job_gets_distinct_nodes_at_once():
    scheduler = cluster(node("a"), node("b"), node("c"))
    result = scheduler.schedule([job("mpi", cores=16, nodes=3)], now=0)
    assert sorted(placed_on(result, "mpi")) == ["a", "b", "c"]


def test_multinode_job_takes_no_nodes_unless_it_gets_all_of_them():
    scheduler = cluster(node("a"), node("b"), node("c", cores=4))
    result = scheduler.schedule([job("mpi", cores=8, nodes=3)], now=0)
    assert result.placements == ()
    assert [scheduler.node_usage(n).job_ids for n in "abc"] == [(), (), ()]


@pytest.mark.parametrize("effect", ["cordon", "evict", "deprovision"])
def test_a_hold_of_any_effect_keeps_new_work_off_the_node(effect):
    held = node("held", cores=64, holds=(Hold(effect, "admin", "testing"),))
    scheduler = cluster(held)
    result = scheduler.schedule([job("j")], now=0)
    assert result.placements == ()
    assert scheduler.node_usage("held").takes_new_work is False


def test_released_hold_lets_work_back_on():
    scheduler = cluster(node("n", holds=(Hold("cordon", "monitoring", "ECC"),)))
    scheduler.upsert_node(node("n"))
    assert placed_on(scheduler.schedule([job("j")], now=0), "j") == ("n",)


def test_node_that_is_not_ready_gets_no_work():
    scheduler = cluster(node("down", ready=False))
    assert scheduler.schedule([job("j")], now=0).placements == ()


def test_node_with_failed_device_plugin_gets_no_device_jobs_but_takes_cpu_jobs():
    scheduler = cluster(node("g", gpus=4, device_plugin_failed=True))
    result = scheduler.schedule([job("gpu", gpus=1), job("cpu", submitted_at=1)], now=0)
    assert placed_on(result, "gpu") is None
    assert placed_on(result, "cpu") == ("g",)


def test_release_gives_capacity_back():
    scheduler = cluster(node("n", cores=16))
    scheduler.schedule([job("j1", cores=16)], now=0)
    scheduler.release("j1")
    assert placed_on(scheduler.schedule([job("j2", cores=16)], now=1), "j2") == ("n",)


def test_a_node_idle_again_comes_after_the_nodes_idle_longer_for_exclusive_work():
    scheduler = cluster(node("a"), node("b"), node("c"))
    scheduler.allocate(job("r", runtime=100), ["a"], started_at=0)
    scheduler.release("r")
    wholes = [job(f"whole{i}", exclusive=True, submitted_at=i) for i in range(3)]
    result = scheduler.schedule(wholes, now=1)
    assert [placed_on(result, w.id) for w in wholes] == [("b",), ("c",), ("a",)]


def test_release_of_an_unknown_job_is_not_found():
    with pytest.raises(NotFound, match="job ghost"):
        cluster(node("n")).release("ghost")


def test_allocate_records_a_running_job_after_a_restart():
    scheduler = cluster(node("a", cores=16), node("b", cores=16))
    scheduler.allocate(job("running", cores=16, nodes=2), ["a", "b"], started_at=0)
    assert scheduler.schedule([job("new")], now=1).placements == ()


def test_allocate_twice_is_already_exists():
    scheduler = cluster(node("n"))
    scheduler.allocate(job("j"), ["n"])
    with pytest.raises(AlreadyExists):
        scheduler.allocate(job("j"), ["n"])


def test_allocate_needs_one_node_per_requested_node():
    with pytest.raises(InvalidArgument, match="1 distinct node"):
        cluster(node("n")).allocate(job("j", nodes=2), ["n", "n"])


def test_reconciled_allocation_may_over_commit_a_node_that_shrank():
    scheduler = cluster(node("n", cores=16))
    scheduler.allocate(job("j", cores=12), ["n"])
    scheduler.upsert_node(node("n", cores=8))
    assert scheduler.node_usage("n").free_cores == -4
    assert scheduler.schedule([job("k", cores=0, memory_gib=0)], now=0).placements == ()


def test_updating_a_node_keeps_what_runs_on_it():
    scheduler = cluster(node("n", cores=16))
    scheduler.schedule([job("j", cores=10)], now=0)
    scheduler.upsert_node(node("n", cores=32, annotations={"zone": "a"}))
    assert scheduler.node_usage("n").free_cores == 22


def test_node_with_jobs_cannot_be_removed():
    scheduler = cluster(node("n"))
    scheduler.schedule([job("j")], now=0)
    with pytest.raises(FailedPrecondition, match="release them first"):
        scheduler.remove_node("n")


def test_removed_node_gets_no_more_work():
    scheduler = cluster(node("n"))
    scheduler.remove_node("n")
    assert scheduler.schedule([job("j")], now=0).placements == ()
    with pytest.raises(NotFound):
        scheduler.node_usage("n")


def test_a_job_already_allocated_cannot_be_pending():
    scheduler = cluster(node("n"))
    scheduler.schedule([job("j")], now=0)
    with pytest.raises(InvalidArgument, match="already allocated"):
        scheduler.schedule([job("j")], now=1)


def test_a_job_that_waited_and_was_then_allocated_cannot_be_pending():
    # the running check trusts the last pass's waiting jobs; allocate() since must undo that
    scheduler = cluster(node("n", cores=4))
    waited = job("j", cores=8)
    assert scheduler.schedule([waited], now=0).placements == ()
    scheduler.upsert_node(node("n", cores=16))
    scheduler.allocate(waited, ["n"], started_at=1)
    with pytest.raises(InvalidArgument, match="pending job j is already allocated"):
        scheduler.schedule([waited], now=2)


def test_a_refused_pass_leaves_the_running_check_whole():
    # a pass refused for a running job must not let the next pass skip the check
    scheduler = cluster(node("n", cores=4))
    scheduler.schedule([job("a", cores=8)], now=0)
    scheduler.allocate(job("r"), ["n"], started_at=0)
    with pytest.raises(InvalidArgument, match="pending job r is already allocated"):
        scheduler.schedule([job("a", cores=8), job("r")], now=1)
    with pytest.raises(InvalidArgument, match="pending job r is already allocated"):
        scheduler.schedule([job("a", cores=8), job("r")], now=2)


def registered_out_of_order() -> list[str]:
    """Node ids registered so that each new one falls between the same two neighbours:
    enough of them to use up the room the index leaves between ranks."""
    ids = ["n-a", "n-z"]
    inner = "n-b"
    for _ in range(24):
        ids.append(inner)
        inner = inner[:-1] + "a" + inner[-1]  # sorts before the last one, after n-a
    return ids


def test_equally_fitting_nodes_are_taken_in_node_id_order_whatever_the_registration_order():
    ids = registered_out_of_order()
    scheduler = cluster(*(node(node_id, cores=1) for node_id in ids))
    result = scheduler.schedule([job(f"j{i:02d}", submitted_at=i) for i in range(len(ids))], 0)
    assert [p.node_ids[0] for p in result.placements] == sorted(ids)


def test_nodes_registered_again_or_removed_keep_the_id_order_of_the_rest():
    ids = registered_out_of_order()
    scheduler = cluster(*(node(node_id, cores=1) for node_id in ids))
    scheduler.remove_node("n-z")
    scheduler.upsert_node(node("n-a", cores=1, memory_gib=8))  # less memory: fits best
    scheduler.upsert_node(node("n-0", cores=1))
    result = scheduler.schedule([job(f"j{i:02d}", submitted_at=i) for i in range(len(ids))], 0)
    rest = sorted(set(ids) - {"n-z", "n-a"} | {"n-0"})
    assert [p.node_ids[0] for p in result.placements] == ["n-a", *rest]


def test_a_node_usage_has_every_field_a_node_usage_has():
    scheduler = cluster(node("n", cores=16, memory_gib=64, gpus=4))
    scheduler.schedule([job("j", cores=6, memory_gib=20, gpus=3)], now=0)
    usage = scheduler.node_usage("n")
    # replace() reads every field of the usage into a new NodeUsage, made by its __init__
    assert dataclasses.replace(usage) == usage
