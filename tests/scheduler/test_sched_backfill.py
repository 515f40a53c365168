"""Queue order, EASY backfill and estimated start times of the default scheduler."""

import gc
import math
from types import SimpleNamespace
from typing import cast

import pytest
from support.scheduler_cluster import cluster, job, node, placed_on

from fuzzball_core.errors import InvalidArgument
from fuzzball_core.scheduling import Hold, ReasonCode
from fuzzball_plugins.schedulers.node_index import NodeClass
from fuzzball_plugins.schedulers.timeline import EndsByClass, EndsWalk


def test_earlier_submission_goes_first_whatever_order_jobs_are_passed_in():
    scheduler = cluster(node("n", cores=16))
    late = job("late", cores=16, submitted_at=2)
    early = job("early", cores=16, submitted_at=1)
    result = scheduler.schedule([late, early], now=5)
    assert [p.job_id for p in result.placements] == ["early"]


def test_higher_priority_goes_before_earlier_submission():
    scheduler = cluster(node("n", cores=16))
    result = scheduler.schedule(
        [job("old", cores=16, submitted_at=1), job("urgent", cores=16, submitted_at=9, priority=5)],
        now=10,
    )
    assert [p.job_id for p in result.placements] == ["urgent"]


def test_a_job_listed_twice_is_refused():
    scheduler = cluster(node("n"))
    with pytest.raises(InvalidArgument, match="listed twice"):
        scheduler.schedule([job("j"), job("j")], now=0)


def test_first_blocked_job_gets_a_reservation_when_running_work_ends():
    scheduler = cluster(node("n", cores=16))
    scheduler.allocate(job("running", cores=12, runtime=100), ["n"], started_at=0)
    result = scheduler.schedule([job("head", cores=16)], now=10)
    assert result.reservation is not None
    assert (result.reservation.job_id, result.reservation.start) == ("head", 100)
    assert result.reservation.node_ids == ("n",)
    assert result.diagnoses["head"].estimated_start == 100


def test_a_running_job_on_a_node_that_changed_class_still_ends_in_the_replay():
    # ends are kept per node class: re-registering the node with an annotation moves it to
    # another class, and the job running there must come along to free it at 100
    scheduler = cluster(node("n", cores=16))
    scheduler.allocate(job("running", cores=12, runtime=100), ["n"], started_at=0)
    scheduler.upsert_node(node("n", cores=16, annotations={"rack": "r1"}))
    result = scheduler.schedule([job("head", cores=16, annotations={"rack": "r1"})], now=10)
    assert result.reservation is not None
    assert result.reservation.start == 100
    assert result.diagnoses["head"].estimated_start == 100
    scheduler.release("running")
    assert placed_on(scheduler.schedule([job("head", cores=16)], now=20), "head") == ("n",)


def test_backfill_starts_a_job_that_ends_before_the_reservation():
    scheduler = cluster(node("n", cores=16))
    scheduler.allocate(job("running", cores=12, runtime=100), ["n"], started_at=0)
    head = job("head", cores=16, submitted_at=1)
    short = job("short", cores=4, submitted_at=2, runtime=50)
    result = scheduler.schedule([head, short], now=10)
    assert placed_on(result, "short") == ("n",)


def test_backfill_refuses_a_job_that_would_delay_the_reservation():
    scheduler = cluster(node("n", cores=16))
    scheduler.allocate(job("running", cores=12, runtime=100), ["n"], started_at=0)
    head = job("head", cores=16, submitted_at=1)
    long = job("long", cores=4, submitted_at=2, runtime=500)
    result = scheduler.schedule([head, long], now=10)
    assert placed_on(result, "long") is None
    assert result.diagnoses["long"].reason == ReasonCode.BACKFILL_NO_FIT


def test_backfill_uses_room_the_reserved_node_has_beyond_the_reservation():
    scheduler = cluster(node("n", cores=32))
    scheduler.allocate(job("running", cores=24, runtime=100), ["n"], started_at=0)
    head = job("head", cores=16, submitted_at=1)
    # at t=100 the node has 32 free: 16 for head, 16 to spare for a long job now
    long = job("long", cores=8, submitted_at=2, runtime=10_000)
    result = scheduler.schedule([head, long], now=10)
    assert placed_on(result, "long") == ("n",)


def test_backfill_spends_the_spare_room_only_once():
    scheduler = cluster(node("n", cores=32))
    scheduler.allocate(job("running", cores=20, runtime=100), ["n"], started_at=0)
    head = job("head", cores=24, submitted_at=1)
    # free now 12, spare at t=100 is 32 - 24 = 8: one 8-core long job fits, a second does not
    first = job("first", cores=8, submitted_at=2, runtime=10_000)
    second = job("second", cores=4, submitted_at=3, runtime=10_000)
    result = scheduler.schedule([head, first, second], now=10)
    assert placed_on(result, "first") == ("n",)
    assert placed_on(result, "second") is None


def test_backfill_uses_nodes_the_reservation_does_not_need():
    scheduler = cluster(node("a", cores=16), node("b", cores=16))
    scheduler.allocate(job("r1", cores=12, runtime=100), ["a"], started_at=0)
    scheduler.allocate(job("r2", cores=12, runtime=1000), ["b"], started_at=0)
    head = job("head", cores=16, submitted_at=1)
    long = job("long", cores=4, submitted_at=2, runtime=10_000)
    result = scheduler.schedule([head, long], now=10)
    assert result.reservation.node_ids == ("a",)
    assert placed_on(result, "long") == ("b",)


def test_reservation_after_a_job_with_no_expected_end_still_protects_its_node():
    scheduler = cluster(node("n", cores=16))
    scheduler.allocate(job("forever", cores=12, runtime=None), ["n"], started_at=0)
    head = job("head", cores=16, submitted_at=1)
    short = job("short", cores=4, submitted_at=2, runtime=5)
    result = scheduler.schedule([head, short], now=10)
    assert result.reservation.start is None
    assert result.diagnoses["head"].estimated_start is None
    assert placed_on(result, "short") is None


def test_multinode_reservation_waits_for_enough_nodes():
    scheduler = cluster(node("a"), node("b"), node("c"))
    scheduler.allocate(job("r1", cores=16, runtime=100), ["a"], started_at=0)
    scheduler.allocate(job("r2", cores=16, runtime=300), ["b"], started_at=0)
    result = scheduler.schedule([job("mpi", cores=16, nodes=3)], now=0)
    assert result.reservation.start == 300
    assert sorted(result.reservation.node_ids) == ["a", "b", "c"]


def test_job_that_only_held_nodes_could_run_does_not_block_the_queue():
    scheduler = cluster(
        node("big", cores=64, holds=(Hold("cordon", "admin", "repair"),)),
        node("small", cores=8),
    )
    scheduler.allocate(job("running", cores=4, runtime=100), ["small"], started_at=0)
    wide = job("wide", cores=32, submitted_at=1)
    narrow = job("narrow", cores=4, submitted_at=2, runtime=10_000)
    result = scheduler.schedule([wide, narrow], now=0)
    assert result.reservation is None
    assert result.diagnoses["wide"].reason == ReasonCode.INSUFFICIENT_RESOURCES
    assert result.diagnoses["wide"].estimated_start is None
    assert placed_on(result, "narrow") == ("small",)


def test_exclusive_reservation_keeps_its_node_empty():
    scheduler = cluster(node("n", cores=16))
    scheduler.allocate(job("running", cores=1, runtime=100), ["n"], started_at=0)
    head = job("whole", exclusive=True, submitted_at=1)
    long = job("long", cores=1, submitted_at=2, runtime=10_000)
    result = scheduler.schedule([head, long], now=0)
    assert result.reservation.start == 100
    assert placed_on(result, "long") is None


def test_waiting_job_behind_the_reservation_gets_an_estimated_start():
    scheduler = cluster(node("a", cores=16), node("b", cores=16))
    scheduler.allocate(job("r1", cores=16, runtime=100), ["a"], started_at=0)
    scheduler.allocate(job("r2", cores=16, runtime=200), ["b"], started_at=0)
    head = job("head", cores=16, nodes=2, submitted_at=1)
    other = job("other", cores=8, submitted_at=2)
    result = scheduler.schedule([head, other], now=0)
    assert result.diagnoses["head"].estimated_start == 200
    # a lower bound: the first node to free up, ignoring the reservation's own use of it
    assert result.diagnoses["other"].estimated_start == 100


def test_estimated_starts_can_be_turned_off():
    from fuzzball_plugins.schedulers.default import DefaultScheduler

    scheduler = DefaultScheduler({"estimate_starts": False})
    scheduler.upsert_node(node("n", cores=16))
    scheduler.allocate(job("r", cores=16, runtime=100), ["n"], started_at=0)
    result = scheduler.schedule([job("head", cores=16), job("next", cores=8, submitted_at=1)], 0)
    assert result.diagnoses["head"].estimated_start == 100
    assert result.diagnoses["next"].estimated_start is None


def test_placements_are_reserved_before_the_next_pass():
    scheduler = cluster(node("n", cores=16))
    first = scheduler.schedule([job("a", cores=10)], now=0)
    second = scheduler.schedule([job("b", cores=10)], now=1)
    assert placed_on(first, "a") == ("n",)
    assert second.placements == ()


def test_running_jobs_ends_are_walked_by_end_then_job_id():
    only = cast(NodeClass, SimpleNamespace(number=0))
    ends = EndsByClass()
    for end, job_id in [(20.0, "b"), (10.0, "z"), (math.inf, "n"), (20.0, "a"), (10.0, "c")]:
        ends.add(only.number, end, job_id)
    walked = [(10.0, ["c", "z"]), (20.0, ["a", "b"]), (math.inf, ["n"])]
    assert list(ends.walk([only])) == walked
    ends.remove(only.number, 10.0, "c")
    ends.remove(only.number, 10.0, "z")
    ends.remove(only.number, 20.0, "b")
    assert list(ends.walk([only])) == [(20.0, ["a"]), (math.inf, ["n"])]
    assert ends.count(only.number) == 2


def test_ends_of_several_classes_are_walked_merged_with_a_job_on_both_once():
    # the ends are listed by class number; a walk is asked for classes
    small, large, other = (cast(NodeClass, SimpleNamespace(number=n)) for n in range(3))
    ends = EndsByClass()
    for cls, end, job_id in [
        (small, 20.0, "b"),
        (large, 10.0, "z"),
        (small, 10.0, "c"),
        (large, 20.0, "b"),  # one job on nodes of both classes
        (large, 20.0, "a"),
        (small, math.inf, "n"),
        (other, 5.0, "elsewhere"),
    ]:
        ends.add(cls.number, end, job_id)
    walked = [(10.0, ["c", "z"]), (20.0, ["a", "b"]), (math.inf, ["n"])]
    assert [(end, list(ids)) for end, ids in ends.walk([small, large])] == walked
    assert [(end, list(ids)) for end, ids in ends.walk([large])] == [
        (10.0, ["z"]),
        (20.0, ["a", "b"]),
    ]


def test_a_walk_narrowed_to_fewer_classes_skips_only_the_dropped_classes_jobs():
    # a replay drops the classes whose questions are all answered; a job also running on a
    # kept class is still walked
    small, large = (cast(NodeClass, SimpleNamespace(number=n)) for n in range(2))
    ends = EndsByClass()
    for cls, end, job_id in [
        (small, 10.0, "s1"),
        (large, 10.0, "l1"),
        (small, 20.0, "s2"),
        (small, 30.0, "both"),
        (large, 30.0, "both"),
        (large, 40.0, "l2"),
        (small, 50.0, "s3"),
    ]:
        ends.add(cls.number, end, job_id)
    walk = ends.walk([small, large])
    assert isinstance(walk, EndsWalk)
    end, ids = next(walk)
    assert (end, list(ids)) == (10.0, ["l1", "s1"])
    walk.keep({large.number})
    assert [(end, list(ids)) for end, ids in walk] == [(30.0, ["both"]), (40.0, ["l2"])]


def test_a_running_jobs_record_is_left_untracked_by_the_cyclic_collector():
    # tens of thousands run at once: an object each would lengthen every full collection
    scheduler = cluster(node("n", cores=16), node("m", cores=16))
    scheduler.allocate(job("one", cores=4, runtime=100), ["n"], started_at=0)
    scheduler.allocate(job("two", cores=4, nodes=2), ["n", "m"], started_at=0)
    # a tuple is untracked by a collection that finds its items untracked already; the
    # first one may reach the record before the fresh tuples it holds
    gc.collect()
    gc.collect()
    records = scheduler._allocations
    assert not gc.is_tracked(records["one"])
    assert not gc.is_tracked(records["two"])


def test_the_table_of_running_jobs_stays_tracked_with_only_untracked_records():
    # untracked, each new record would track it again as a young object: every young
    # collection would walk all its entries
    scheduler = cluster(node("n", cores=16))
    scheduler.allocate(job("one", cores=4, runtime=100), ["n"], started_at=0)
    gc.collect()
    gc.collect()
    assert not gc.is_tracked(scheduler._allocations["one"])
    assert gc.is_tracked(scheduler._allocations)


def test_the_diagnoses_tell_a_jobs_reason_without_building_its_diagnosis():
    scheduler = cluster(node("n", cores=16))
    scheduler.allocate(job("running", cores=12, runtime=100), ["n"], started_at=0)
    head = job("head", cores=16, submitted_at=1)
    long = job("long", cores=4, submitted_at=2, runtime=500)
    diagnoses = scheduler.schedule([head, long], now=10).diagnoses
    reasons = {job_id: diagnoses.reason_of(job_id) for job_id in ("head", "long")}  # type: ignore[attr-defined]
    assert reasons == {"head": diagnoses["head"].reason, "long": ReasonCode.BACKFILL_NO_FIT}
    assert reasons["head"] != reasons["long"]


def test_waiting_shapes_of_one_class_each_get_their_own_start_whatever_memory_they_ask():
    # a node coming free is asked about by every question of its class, from the least
    # memory up: the first that asks more than the node has ends its walk
    scheduler = cluster(node("a", cores=16, memory_gib=64), node("b", cores=16, memory_gib=64))
    scheduler.allocate(job("r1", cores=8, memory_gib=48, runtime=100), ["a"], started_at=0)
    scheduler.allocate(job("r2", cores=8, memory_gib=8, runtime=300), ["a"], started_at=0)
    scheduler.allocate(job("r3", cores=16, memory_gib=64, runtime=200), ["b"], started_at=0)
    head = job("head", cores=16, memory_gib=60, submitted_at=1)
    big = job("big", cores=4, memory_gib=60, submitted_at=2)
    small = job("small", cores=4, memory_gib=8, submitted_at=3)
    whole = job("whole", exclusive=True, submitted_at=4)
    diagnoses = scheduler.schedule([head, big, small, whole], now=0).diagnoses
    assert diagnoses["head"].estimated_start == 200
    assert diagnoses["small"].estimated_start == 100
    assert diagnoses["big"].estimated_start == 200
    assert diagnoses["whole"].estimated_start == 200


def test_a_gpu_nodes_waiting_jobs_start_when_both_their_gpus_and_cores_come_back():
    scheduler = cluster(node("g", cores=16, gpus=4))
    scheduler.allocate(job("gpus", cores=2, gpus=4, runtime=200), ["g"], started_at=0)
    scheduler.allocate(job("cores", cores=14, runtime=100), ["g"], started_at=0)
    wants_gpus = job("wants-gpus", cores=2, gpus=2, submitted_at=1)
    wants_cores = job("wants-cores", cores=4, submitted_at=2)
    diagnoses = scheduler.schedule([wants_gpus, wants_cores], now=0).diagnoses
    assert diagnoses["wants-gpus"].estimated_start == 200
    assert diagnoses["wants-cores"].estimated_start == 100
