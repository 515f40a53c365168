"""A pass answers equal requests once: what must still tell them apart.

The default scheduler answers shapes that differ only by their runtime as one while no node
must be free by a deadline (``fuzzball.io/place-until``), and lets later jobs of a shape that
has failed in a pass join its verdict without another look. These are the cases where that
sharing must not blur a difference.
"""

import pytest
from support.scheduler_cluster import cluster, job, node, placed_on

from fuzzball_core.errors import InvalidArgument
from fuzzball_core.scheduling import (
    PLACE_UNTIL,
    Hold,
    JobRequest,
    QueueChanges,
    ReasonCode,
    ReasonsByJob,
    Resources,
)


def test_a_deadline_node_takes_the_short_job_after_refusing_a_long_one_of_the_same_request():
    scheduler = cluster(node("ttl", cores=16, annotations={PLACE_UNTIL: "1000"}))
    long = job("long", cores=16, submitted_at=1, runtime=5000)
    short = job("short", cores=16, submitted_at=2, runtime=100)
    result = scheduler.schedule([long, short], now=0)
    assert placed_on(result, "short") == ("ttl",)
    assert placed_on(result, "long") is None


def test_jobs_differing_only_by_runtime_share_one_diagnosis_message():
    scheduler = cluster(node("n", cores=4))
    first = job("first", cores=8, submitted_at=1, runtime=300)
    second = job("second", cores=8, submitted_at=2, runtime=600)
    result = scheduler.schedule([first, second], now=0)
    assert result.diagnoses["first"].message == result.diagnoses["second"].message


def test_later_jobs_of_the_reservations_shape_wait_as_backfill_not_as_the_holder():
    scheduler = cluster(node("n", cores=16))
    scheduler.allocate(job("running", cores=12, runtime=100), ["n"], started_at=0)
    head = job("head", cores=16, submitted_at=1)
    twin = job("twin", cores=16, submitted_at=2)
    result = scheduler.schedule([head, twin], now=10)
    assert result.reservation is not None and result.reservation.job_id == "head"
    assert result.diagnoses["head"].reason == ReasonCode.INSUFFICIENT_RESOURCES
    assert result.diagnoses["twin"].reason == ReasonCode.BACKFILL_NO_FIT


def test_a_job_that_ends_before_the_reservation_is_backfilled_though_a_twin_was_refused():
    scheduler = cluster(node("n", cores=16))
    scheduler.allocate(job("running", cores=12, runtime=100), ["n"], started_at=0)
    head = job("head", cores=16, submitted_at=1)
    long = job("long", cores=4, submitted_at=2, runtime=500)
    short = job("short", cores=4, submitted_at=3, runtime=50)
    result = scheduler.schedule([head, long, short], now=10)
    assert placed_on(result, "long") is None
    assert placed_on(result, "short") == ("n",)


def test_jobs_of_equal_requests_share_one_shape_object():
    first = JobRequest("a", Resources(2, 1 << 30), annotations={"zone": "a"})
    second = JobRequest("b", Resources(2, 1 << 30), annotations={"zone": "a"})
    assert first.shape is second.shape


def test_a_shape_that_waited_before_the_reservation_waits_as_backfill_after_it():
    scheduler = _big_node_cordoned_and_n_busy()
    first = job("first", cores=32, submitted_at=1)
    second = job("second", cores=32, submitted_at=2)
    holder = job("holder", cores=16, submitted_at=3)
    after = job("after", cores=32, submitted_at=4)
    result = scheduler.schedule([first, second, holder, after], now=10)
    assert result.reservation is not None and result.reservation.job_id == "holder"
    assert result.diagnoses["second"].reason == ReasonCode.INSUFFICIENT_RESOURCES
    assert result.diagnoses["after"].reason == ReasonCode.BACKFILL_NO_FIT


def pass_over_changes(scheduler, jobs: list[JobRequest], now: float):
    """A pass over ``jobs`` through ``schedule_changes`` with the scheduler's copy of the
    queue (an empty first pass makes it): the path that passes over settled jobs unread."""
    scheduler.schedule_changes(QueueChanges(1, [], (), 0), list, now - 1)
    return scheduler.schedule_changes(QueueChanges(2, jobs, (), len(jobs)), lambda: jobs, now)


def _big_node_cordoned_and_n_busy():
    """A 32-core node under a cordon and a 16-core one with 12 cores running until t=100:
    a 32-core job cannot start, a 16-core one reserves ``n``."""
    cordon = Hold("cordon", "admin", "maintenance", "root", 0.0)
    scheduler = cluster(node("big", cores=32, holds=(cordon,)), node("n", cores=16))
    scheduler.allocate(job("running", cores=12, runtime=100), ["n"], started_at=0)
    return scheduler


def test_later_jobs_of_a_shape_met_before_the_reservation_keep_the_answer_they_had_then():
    # the third job of a failed shape is passed over without a look, before the reservation
    # is made and again after it: each is told what its place in the queue told it
    scheduler = _big_node_cordoned_and_n_busy()
    before = [job(f"before{i}", cores=32, submitted_at=i) for i in range(3)]
    holder = job("holder", cores=16, submitted_at=3)
    after = [job(f"after{i}", cores=32, submitted_at=4 + i) for i in range(3)]
    diagnoses = pass_over_changes(scheduler, [*before, holder, *after], now=10).diagnoses
    assert [diagnoses.reason_of(f"before{i}") for i in range(3)] == [
        ReasonCode.INSUFFICIENT_RESOURCES
    ] * 3
    assert [diagnoses[f"after{i}"].reason for i in range(3)] == [ReasonCode.BACKFILL_NO_FIT] * 3
    assert diagnoses["after2"].message == diagnoses["after1"].message


def _reason_or_none(diagnoses, job_id: str) -> ReasonCode | None:
    try:
        return diagnoses.reason_of(job_id)
    except KeyError:
        return None


def test_the_reasons_of_jobs_in_bulk_are_each_ones_reason_before_and_after_the_reservation():
    scheduler = _big_node_cordoned_and_n_busy()
    before = [job(f"before{i}", cores=32, submitted_at=i) for i in range(3)]
    holder = job("holder", cores=16, submitted_at=3)
    small = job("small", cores=2, submitted_at=3.5)
    after = [job(f"after{i}", cores=32, submitted_at=4 + i) for i in range(3)]
    diagnoses = pass_over_changes(scheduler, [*before, holder, small, *after], now=10).diagnoses
    # in an order of their own, with a placed job and one the pass never saw
    ids = ["after2", "small", "unknown", "holder", *(j.id for j in before), "after0", "after1"]
    reasons = diagnoses.reasons_of(ids)
    assert reasons == [_reason_or_none(diagnoses, job_id) for job_id in ids]
    assert reasons[2] is None  # never queued
    assert reasons[0] == ReasonCode.BACKFILL_NO_FIT
    assert reasons[4] == ReasonCode.INSUFFICIENT_RESOURCES


def test_the_reasons_of_jobs_in_bulk_leave_out_a_placed_job_among_jobs_passed_over():
    scheduler = cluster(node("n", cores=16))
    scheduler.allocate(job("running", cores=12, runtime=100), ["n"], started_at=0)
    wide = [job(f"wide{i}", cores=8, submitted_at=i) for i in range(4)]
    small = job("small", cores=2, submitted_at=2.5)
    diagnoses = pass_over_changes(scheduler, [*wide, small], now=10).diagnoses
    ids = ["wide3", "small", "wide0"]
    assert diagnoses.reasons_of(ids) == [_reason_or_none(diagnoses, job_id) for job_id in ids]
    assert diagnoses.reasons_of(ids)[1] is None


def test_the_reasons_of_jobs_in_bulk_after_a_whole_queue_pass_are_each_ones_reason():
    scheduler = cluster(node("n", cores=16))
    scheduler.allocate(job("running", cores=12, runtime=100), ["n"], started_at=0)
    wide = [job(f"wide{i}", cores=8, submitted_at=i) for i in range(3)]
    diagnoses = scheduler.schedule([*wide, job("small", cores=2, submitted_at=5)], now=10).diagnoses
    ids = ["small", "wide2", "wide0", "unknown"]
    assert diagnoses.reasons_of(ids) == [_reason_or_none(diagnoses, job_id) for job_id in ids]
    assert diagnoses.reasons_of(ids)[1] == ReasonCode.BACKFILL_NO_FIT


def test_the_default_schedulers_diagnoses_tell_reasons_by_job_whichever_pass_made_them():
    # the engine asks a pass's diagnoses for every waiting job's reason in one call only
    # where they declare it
    scheduler = _big_node_cordoned_and_n_busy()
    jobs = [job(f"wide{i}", cores=32, submitted_at=i) for i in range(2)]
    assert isinstance(pass_over_changes(scheduler, jobs, now=10).diagnoses, ReasonsByJob)
    assert isinstance(scheduler.schedule(jobs, now=11).diagnoses, ReasonsByJob)
    assert not isinstance({}, ReasonsByJob)


def test_a_placed_job_among_jobs_passed_over_is_not_diagnosed():
    scheduler = cluster(node("n", cores=16))
    scheduler.allocate(job("running", cores=12, runtime=100), ["n"], started_at=0)
    wide = [job(f"wide{i}", cores=8, submitted_at=i) for i in range(4)]
    small = job("small", cores=2, submitted_at=2.5)
    diagnoses = pass_over_changes(scheduler, [*wide, small], now=10).diagnoses
    assert "small" not in diagnoses
    assert "unknown" not in diagnoses
    with pytest.raises(KeyError):
        diagnoses.reason_of("small")
    with pytest.raises(KeyError):
        diagnoses["small"]
    assert list(diagnoses) == ["wide0", "wide1", "wide2", "wide3"]
    assert len(diagnoses) == 4
    assert "wide3" in diagnoses


def test_a_whole_queue_pass_after_one_that_passed_jobs_over_checks_them_as_waiting():
    scheduler = cluster(node("n", cores=16))
    scheduler.allocate(job("running", cores=12, runtime=100), ["n"], started_at=0)
    wide = [job(f"wide{i}", cores=8, submitted_at=i) for i in range(4)]
    pass_over_changes(scheduler, wide, now=10)
    scheduler.allocate(job("wide3", cores=2), ["n"], started_at=11)
    with pytest.raises(InvalidArgument, match="wide3 is already allocated"):
        scheduler.schedule(wide, now=12)
