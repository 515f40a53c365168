"""``Scheduler.schedule_changes``: a pass told only what changed in the queue decides what a
pass over the whole queue decides; a driver without a copy of the queue gets the whole queue."""

import random

import pytest
from support.scheduler_cluster import cluster, job, node

from fuzzball_core.errors import InvalidArgument
from fuzzball_core.orchestrate.pending_queue import PendingQueue
from fuzzball_core.scheduling import (
    Diagnosis,
    JobRequest,
    NodeInfo,
    NodeUsage,
    QueueChanges,
    Scheduler,
    ScheduleResult,
)


class WholeQueue:
    """The engine's side: its queue, and the changes since the last pass."""

    def __init__(self) -> None:
        self.jobs: dict[str, JobRequest] = {}
        self.arrived: dict[str, JobRequest] = {}
        self.departed: set[str] = set()
        self.generation = 0
        self.reads = 0

    def add(self, request: JobRequest) -> None:
        self.jobs[request.id] = self.arrived[request.id] = request
        self.departed.discard(request.id)

    def drop(self, job_id: str) -> None:
        del self.jobs[job_id]
        self.arrived.pop(job_id, None)
        self.departed.add(job_id)

    def changes(self) -> QueueChanges:
        self.generation += 1
        changes = QueueChanges(
            self.generation, list(self.arrived.values()), set(self.departed), len(self.jobs)
        )
        self.arrived, self.departed = {}, set()
        return changes

    def pending(self) -> list[JobRequest]:
        self.reads += 1
        return list(self.jobs.values())

    def placed(self, result: ScheduleResult) -> None:
        for placement in result.placements:
            del self.jobs[placement.job_id]


def nodes_for_churn() -> list[NodeInfo]:
    return [node(f"n{i}", cores=8 + 8 * (i % 3), memory_gib=32) for i in range(6)] + [
        node("gpu", cores=16, gpus=2),
        node("zoned", cores=8, annotations={"zone": "a"}),
    ]


def summary(result: ScheduleResult) -> tuple:
    """What a pass decided, in comparable values."""
    return (
        [(p.job_id, p.node_ids) for p in result.placements],
        result.reservation,
        sorted(
            (job_id, d.reason, d.message, d.estimated_start)
            for job_id, d in result.diagnoses.items()
        ),
    )


@pytest.mark.parametrize("accounts", [1, 3])
def test_passes_over_changes_decide_as_passes_over_the_whole_queue(accounts):
    rng = random.Random(7)
    told = cluster(*nodes_for_churn())
    whole = cluster(*nodes_for_churn())
    engine = WholeQueue()
    running: list[str] = []
    serial = 0
    for step in range(40):
        now = step * 10.0
        for _ in range(rng.randint(0, 6)):
            serial += 1
            engine.add(
                job(
                    f"j{serial:03d}",
                    cores=rng.choice([1, 2, 4, 8]),
                    memory_gib=rng.choice([1, 4, 16]),
                    gpus=rng.choice([0, 0, 0, 1]),
                    annotations={"zone": "a"} if rng.random() < 0.1 else None,
                    submitted_at=now,
                    priority=rng.choice([0, 0, 5]),
                    runtime=rng.choice([60.0, 600.0, None]),
                    account=f"acct{rng.randrange(accounts)}",
                )
            )
        if engine.jobs and rng.random() < 0.2:
            # a run leaves the queue without being placed (its workflow was cancelled)
            engine.drop(rng.choice(sorted(engine.jobs)))
        for _ in range(min(len(running), rng.randint(0, 3))):
            ended = running.pop(rng.randrange(len(running)))
            told.release(ended)
            whole.release(ended)
        expected = whole.schedule(list(engine.jobs.values()), now)
        result = told.schedule_changes(engine.changes(), engine.pending, now)
        assert summary(result) == summary(expected)
        engine.placed(result)
        running.extend(p.job_id for p in result.placements)
    # the whole queue was read once, for the first pass
    assert engine.reads == 1


def test_a_replaced_job_waits_as_its_new_request_asks():
    scheduler = cluster(node("a", cores=4))
    engine = WholeQueue()
    engine.add(job("big", cores=8))
    first = scheduler.schedule_changes(engine.changes(), engine.pending, 0)
    assert "big" in first.diagnoses
    engine.add(job("big", cores=2))
    second = scheduler.schedule_changes(engine.changes(), engine.pending, 10)
    assert [p.job_id for p in second.placements] == ["big"]


@pytest.mark.parametrize("stale", ["skipped generation", "reset", "size disagrees"])
def test_a_stale_copy_of_the_queue_is_read_again_whole(stale):
    scheduler = cluster(node("a", cores=1))
    engine = WholeQueue()
    engine.add(job("first", cores=1, submitted_at=1))
    engine.add(job("second", cores=1, submitted_at=2))
    engine.placed(scheduler.schedule_changes(engine.changes(), engine.pending, 0))
    assert engine.reads == 1
    # an arrival the copy never hears of
    engine.jobs["third"] = job("third", cores=1, submitted_at=3)
    changes = engine.changes()
    if stale == "skipped generation":
        changes = QueueChanges(changes.generation + 1, (), (), len(engine.jobs))
    elif stale == "reset":
        changes = QueueChanges(changes.generation, (), (), len(engine.jobs), reset=True)
    result = scheduler.schedule_changes(changes, engine.pending, 10)
    assert engine.reads == 2
    assert sorted(result.diagnoses) == ["second", "third"]


def test_a_pass_through_schedule_makes_the_copy_stale():
    scheduler = cluster(node("a", cores=1))
    engine = WholeQueue()
    engine.add(job("first", cores=1))
    engine.placed(scheduler.schedule_changes(engine.changes(), engine.pending, 0))
    scheduler.schedule([], 5)
    scheduler.schedule_changes(engine.changes(), engine.pending, 10)
    assert engine.reads == 2


def test_an_arrival_already_allocated_is_refused_and_the_queue_read_again():
    scheduler = cluster(node("a", cores=4))
    engine = WholeQueue()
    engine.add(job("waiting", cores=8))
    scheduler.schedule_changes(engine.changes(), engine.pending, 0)
    running = job("running", cores=1)
    scheduler.allocate(running, ["a"], started_at=0)
    engine.add(running)
    with pytest.raises(InvalidArgument, match="running is already allocated"):
        scheduler.schedule_changes(engine.changes(), engine.pending, 10)
    engine.drop("running")
    result = scheduler.schedule_changes(engine.changes(), engine.pending, 20)
    assert engine.reads == 2
    assert list(result.diagnoses) == ["waiting"]


def test_a_waiting_job_allocated_between_passes_is_refused():
    scheduler = cluster(node("a", cores=4))
    engine = WholeQueue()
    waiting = job("waiting", cores=8)
    engine.add(waiting)
    scheduler.schedule_changes(engine.changes(), engine.pending, 0)
    scheduler.upsert_node(node("b", cores=8))
    scheduler.allocate(waiting, ["b"], started_at=0)
    with pytest.raises(InvalidArgument, match="waiting is already allocated"):
        scheduler.schedule_changes(engine.changes(), engine.pending, 10)


class OnlyWholeQueues(Scheduler):
    """A third-party driver written before schedule_changes: it implements schedule only."""

    def __init__(self) -> None:
        super().__init__({})
        self.passes: list[list[str]] = []

    def upsert_node(self, node: NodeInfo) -> None:
        pass

    def remove_node(self, node_id: str) -> None:
        pass

    def allocate(self, job, node_ids, *, started_at=None, cpus=None) -> None:
        pass

    def release(self, job_id: str) -> None:
        pass

    def schedule(self, pending, now: float) -> ScheduleResult:
        self.passes.append(sorted(job.id for job in pending))
        return ScheduleResult()

    def check_feasible(self, job: JobRequest) -> Diagnosis | None:
        return None

    def node_usage(self, node_id: str) -> NodeUsage:
        raise NotImplementedError


def test_a_driver_implementing_only_schedule_is_handed_the_whole_queue_every_pass():
    driver = OnlyWholeQueues()
    engine = WholeQueue()
    engine.add(job("a"))
    driver.schedule_changes(engine.changes(), engine.pending, 0)
    engine.add(job("b"))
    driver.schedule_changes(engine.changes(), engine.pending, 10)
    assert driver.passes == [["a"], ["a", "b"]]


def test_pending_queue_records_keys_set_and_removed_since_the_last_take():
    queue: PendingQueue[int] = PendingQueue()
    generation, reset, _, _ = queue.take_changes()
    assert (generation, reset) == (1, True)
    queue["a"] = 1
    queue["b"] = 2
    queue["c"] = 3
    del queue["b"]
    assert queue.pop("c") == 3
    assert queue.pop("missing", None) is None
    queue["c"] = 4
    assert queue.take_changes() == (2, False, {"a", "c"}, {"b"})
    assert queue.take_changes() == (3, False, set(), set())


@pytest.mark.parametrize(
    "change",
    [
        lambda q: q.clear(),
        lambda q: q.update({"x": 1}),
        lambda q: q.setdefault("y", 2),
        lambda q: q.popitem(),
        lambda q: q.__ior__({"z": 3}),
    ],
    ids=["clear", "update", "setdefault", "popitem", "ior"],
)
def test_pending_queue_changes_not_recorded_key_by_key_reset_it(change):
    queue: PendingQueue[int] = PendingQueue({"a": 1})
    queue.take_changes()
    change(queue)
    assert queue.take_changes()[1:] == (True, set(), set())
