"""A pass's arrivals added to the scheduler's queue copy together (issue 19, twenty-fifth
scheduler round): the jobs behind the last waiting job go to the end of the copy and of its
queue in C in one flush, those that come before it (a higher priority) are inserted after
them where their keys put them, and a replacement puts everything before it in place first;
the copy ends as :meth:`_QueueCopy.add` of each arrival in turn leaves it."""

import random

import pytest
from support.scheduler_cluster import cluster, job, node

import fuzzball_plugins.schedulers.default as default
from fuzzball_core.scheduling import JobRequest, QueueChanges, ScheduleResult
from fuzzball_plugins.schedulers._free_index import ffi, lib
from fuzzball_plugins.schedulers.queue_run import QueueRuns


def one_by_one(copy: default._QueueCopy, arrivals: list[JobRequest]) -> None:
    """The arrivals added as :meth:`_QueueCopy.add` of each in turn (the path add_all keeps
    to)."""
    for request in arrivals:
        copy.add(request)


def positions_in_c(copy: default._QueueCopy) -> list[int]:
    """Where the walk in C meets each job of ``copy.ordered`` first, by shape (a walk that
    passes over every other shape stops at the shape's first job): the jobs' positions in
    the queue in C when every job has a shape of its own."""
    runs = QueueRuns()
    full = ffi.new("int32_t[4]")
    found = []
    for request in copy.ordered:
        runs.clear()
        for other in copy.ordered:
            if other.shape is not request.shape:
                runs.settle(id(other.shape))
        runs.bind(ffi.NULL, ffi.NULL, copy.queue, full)
        assert lib.fi_place_run(runs.table, 0, 0.0, 0, 0.0, ffi.NULL, 0) == 0
        found.append(runs.stop[0])
    return found


def state(copy: default._QueueCopy) -> tuple:
    """What a copy holds, in comparable values."""
    return (
        [request.id for request in copy.ordered],
        sorted(copy.jobs),
        dict(copy.accounts),
        lib.fi_queue_count(copy.queue),
    )


def _arrival(rng: random.Random, serial: int, memory_gib: int) -> JobRequest:
    # a memory of its own per job: a shape of its own, so the walk finds each job in C
    return job(
        f"j{serial:03d}",
        cores=1,
        memory_gib=memory_gib,
        submitted_at=float(rng.randrange(40)),
        priority=rng.choice([0, 0, 0, 10]),
        account=rng.choice(["a", "b"]),
    )


@pytest.mark.parametrize("seed", [2, 7, 19])
def test_arrivals_added_together_leave_the_copy_as_adding_each_in_turn(seed):
    rng = random.Random(seed)
    memory = iter(range(1, 10_000))
    waiting = [_arrival(rng, n, next(memory)) for n in range(30)]
    together, each = default._QueueCopy(waiting), default._QueueCopy(waiting)
    serial = 30
    for _ in range(6):
        arrivals = []
        for _ in range(rng.randint(5, 15)):
            if rng.random() < 0.15:
                # a replacement: an id waiting or arriving already, with a new request
                replaced = rng.choice(list(together.jobs) + [r.id for r in arrivals])
                arrivals.append(
                    job(replaced, cores=2, memory_gib=next(memory), priority=rng.choice([0, 10]))
                )
            else:
                arrivals.append(_arrival(rng, serial, next(memory)))
                serial += 1
        together.add_all(arrivals)
        one_by_one(each, arrivals)
        assert state(together) == state(each)
    assert positions_in_c(together) == list(range(len(together.ordered)))


def test_a_higher_priority_arrival_waits_ahead_of_the_waiting_jobs():
    copy = default._QueueCopy([job("old", memory_gib=1, submitted_at=0.0)])
    copy.add_all(
        [
            job("late", memory_gib=2, submitted_at=2.0),
            job("urgent", memory_gib=3, submitted_at=3.0, priority=10),
            job("later", memory_gib=4, submitted_at=4.0),
        ]
    )
    assert [request.id for request in copy.ordered] == ["urgent", "old", "late", "later"]
    assert positions_in_c(copy) == [0, 1, 2, 3]


def test_a_replacement_among_the_arrivals_waits_as_its_last_request_asks():
    copy = default._QueueCopy([job("old", memory_gib=1, submitted_at=0.0)])
    copy.add_all(
        [
            job("first", memory_gib=2, submitted_at=1.0, priority=10),
            job("first", memory_gib=3, submitted_at=5.0),
            job("next", memory_gib=4, submitted_at=2.0),
        ]
    )
    assert [request.id for request in copy.ordered] == ["old", "next", "first"]
    assert copy.jobs["first"].resources.memory == 3 << 30
    assert (copy.accounts, lib.fi_queue_count(copy.queue)) == ({"": 3}, 3)
    assert positions_in_c(copy) == [0, 1, 2]


def test_arrivals_ahead_of_the_last_leave_one_flush_of_the_jobs_behind(monkeypatch):
    flushed: list[int] = []
    real = default._QueueCopy._flush

    def counted(self, behind):
        flushed.append(len(behind))
        return real(self, behind)

    monkeypatch.setattr(default._QueueCopy, "_flush", counted)
    copy = default._QueueCopy([job("old", memory_gib=1, submitted_at=0.0)])
    flushed.clear()
    arrivals = []
    for n in range(8):
        arrivals.append(job(f"b{n}", memory_gib=10 + n, submitted_at=1.0 + n))
        arrivals.append(job(f"p{n}", memory_gib=30 + n, submitted_at=1.0 + n, priority=10))
    copy.add_all(arrivals)
    # the eight behind the last in one flush; the eight ahead inserted one by one
    assert flushed == [8]
    assert [request.id for request in copy.ordered] == (
        [f"p{n}" for n in range(8)] + ["old"] + [f"b{n}" for n in range(8)]
    )


def summary(result: ScheduleResult) -> tuple:
    """What a pass decided, in comparable values."""
    return (
        [(p.job_id, p.node_ids) for p in result.placements],
        result.reservation,
        [(job_id, repr(d)) for job_id, d in result.diagnoses.items()],
    )


@pytest.mark.parametrize("seed", [3, 13, 29])
def test_passes_over_arrivals_with_priorities_decide_as_passes_over_the_whole_queue(seed):
    # the same passes through the queue copy (arrivals added together) and through the
    # whole queue handed over each pass (no copy): equal decisions, pass by pass
    rng = random.Random(seed)
    infos = [node(f"n{i}", cores=8 + 8 * (i % 2), memory_gib=32) for i in range(6)]
    told, whole = cluster(*infos), cluster(*infos)
    pending: dict[str, JobRequest] = {}
    running: list[str] = []
    for step in range(40):
        now = float(step)
        arrived = []
        for _ in range(rng.randint(0, 10)):
            serial = f"j{step:02d}-{len(arrived):02d}"
            if pending and rng.random() < 0.1:
                serial = rng.choice(list(pending))  # a replacement
            request = job(
                serial,
                cores=rng.choice([1, 2, 4, 8]),
                memory_gib=rng.choice([1, 4]),
                submitted_at=now,
                priority=rng.choice([0, 0, 0, 10]),
                runtime=rng.choice([30.0, 300.0, None]),
            )
            pending[request.id] = request
            arrived.append(request)
        for _ in range(min(len(running), rng.randint(0, 4))):
            ended = running.pop(rng.randrange(len(running)))
            told.release(ended)
            whole.release(ended)
        changes = QueueChanges(step + 1, arrived, set(), len(pending))
        result = told.schedule_changes(changes, lambda: list(pending.values()), now)
        expected = whole.schedule(list(pending.values()), now)
        assert summary(result) == summary(expected), step
        for placement in result.placements:
            del pending[placement.job_id]
            running.append(placement.job_id)
    assert running
