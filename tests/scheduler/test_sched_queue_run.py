"""The pass's walk over a plain queue in C (issue 19, twenty-first scheduler round): the
one-node jobs of a shape the pass has placed by one C call are placed by the walk
(``fi_place_run``) without a Python step each, the jobs of settled shapes passed over, the
first job of a shape whose key is blocked settling it; the queue copy's queue in C follows
the copy; every pass decides as a pass over the whole queue (no walk) does."""

import random

import pytest
from support.scheduler_cluster import cluster, job, node

import fuzzball_plugins.schedulers.default as default
from fuzzball_core.scheduling import JobRequest, QueueChanges, ScheduleResult
from fuzzball_plugins.schedulers._free_index import ffi, lib
from fuzzball_plugins.schedulers.fair_share import FairShare, FairShareConfig
from fuzzball_plugins.schedulers.queue_run import QueueRuns


class WholeQueue:
    """The engine's side: its queue, and the changes since the last pass."""

    def __init__(self) -> None:
        self.jobs: dict[str, JobRequest] = {}
        self.arrived: list[JobRequest] = []
        self.generation = 0

    def add(self, request: JobRequest) -> None:
        self.jobs[request.id] = request
        self.arrived.append(request)

    def changes(self) -> QueueChanges:
        self.generation += 1
        changes = QueueChanges(self.generation, self.arrived, set(), len(self.jobs))
        self.arrived = []
        return changes

    def pending(self) -> list[JobRequest]:
        return list(self.jobs.values())

    def placed(self, result: ScheduleResult) -> None:
        for placement in result.placements:
            del self.jobs[placement.job_id]


def summary(result: ScheduleResult) -> tuple:
    """What a pass decided, in comparable values."""
    return (
        [(p.job_id, p.node_ids) for p in result.placements],
        result.reservation,
        [(job_id, repr(d)) for job_id, d in result.diagnoses.items()],
    )


def test_a_run_of_one_node_jobs_of_one_shape_takes_one_python_placement(monkeypatch):
    calls: list[str] = []
    real = default.DefaultScheduler._place_one

    def counted(self, job_request, *rest):
        calls.append(job_request.id)
        return real(self, job_request, *rest)

    monkeypatch.setattr(default.DefaultScheduler, "_place_one", counted)
    scheduler = cluster(*[node(f"n{i}", cores=8) for i in range(20)])
    engine = WholeQueue()
    for number in range(50):
        engine.add(job(f"j{number:02d}", cores=1, submitted_at=float(number)))
    # the first pass reads the queue whole, the second learns the shape
    engine.placed(scheduler.schedule_changes(engine.changes(), engine.pending, 0.0))
    engine.add(job("j50", cores=1, submitted_at=50.0))
    engine.placed(scheduler.schedule_changes(engine.changes(), engine.pending, 0.5))
    for number in range(51, 101):
        engine.add(job(f"j{number:02d}", cores=1, submitted_at=float(number)))
    calls.clear()
    result = scheduler.schedule_changes(engine.changes(), engine.pending, 1.0)
    # the third places the shape's 50 jobs in C
    assert len(result.placements) == 50
    assert calls == []


def test_jobs_of_a_blocked_key_are_settled_without_a_python_step_each(monkeypatch):
    scheduler = cluster(node("n0", cores=4))
    engine = WholeQueue()
    timeouts = [60.0, 120.0, 180.0, 240.0, 300.0]
    # five timeouts of one request: five shape objects answered by one key
    for number in range(60):
        runtime = timeouts[number % 5]
        engine.add(job(f"j{number:02d}", cores=2, submitted_at=float(number), runtime=runtime))
    first = scheduler.schedule_changes(engine.changes(), engine.pending, 0.0)
    engine.placed(first)
    assert len(first.placements) == 2
    # the first pass over the copy (the one above read the queue whole) meets each shape
    scheduler.schedule_changes(engine.changes(), engine.pending, 0.5)
    stepped: list[str] = []
    real = QueueRuns.note

    def note(self, shape, key):
        stepped.append(shape)
        return real(self, shape, key)

    monkeypatch.setattr(QueueRuns, "note", note)
    result = scheduler.schedule_changes(engine.changes(), engine.pending, 1.0)
    assert result.placements == ()
    # one Python step finds the key without room; the walk settles the other four shapes
    assert len(stepped) == 1
    assert len(result.diagnoses) == 58


def _random_job(rng: random.Random, serial: int, now: float):
    kind = rng.random()
    return job(
        f"j{serial:04d}",
        cores=rng.choice([1, 2, 4, 8]),
        memory_gib=rng.choice([1, 4, 16]),
        gpus=1 if kind < 0.2 else 0,
        nodes=2 if 0.2 <= kind < 0.3 else 1,
        exclusive=0.3 <= kind < 0.36,
        annotations={"zone": "a"} if rng.random() < 0.05 else None,
        submitted_at=now,
        priority=rng.choice([0, 0, 0, 5]),
        runtime=rng.choice([60.0, 600.0, 1800.0, None]),
    )


@pytest.mark.parametrize("seed", [3, 17, 29])
def test_passes_with_the_walk_decide_as_passes_over_the_whole_queue(seed):
    rng = random.Random(seed)

    def nodes():
        return [node(f"n{i}", cores=8 + 8 * (i % 3), memory_gib=32) for i in range(8)] + [
            node("gpu0", cores=16, gpus=2),
            node("gpu1", cores=16, gpus=4),
            node("zoned", cores=8, annotations={"zone": "a"}),
        ]

    told, whole = cluster(*nodes()), cluster(*nodes())
    engine = WholeQueue()
    running: list[str] = []
    serial = 0
    for step in range(80):
        now = step * 30.0
        for _ in range(rng.randint(0, 12)):
            serial += 1
            engine.add(_random_job(rng, serial, now))
        for _ in range(min(len(running), rng.randint(0, 5))):
            ended = running.pop(rng.randrange(len(running)))
            told.release(ended)
            whole.release(ended)
        expected = whole.schedule(list(engine.jobs.values()), now)
        result = told.schedule_changes(engine.changes(), engine.pending, now)
        assert summary(result) == summary(expected), step
        engine.placed(result)
        running.extend(p.job_id for p in result.placements)


def test_with_fair_share_off_the_walk_charges_each_account_its_jobs():
    options = {"fair_share": {"enabled": False}}
    told = cluster(*[node(f"n{i}", cores=8) for i in range(4)], options=options)
    whole = cluster(*[node(f"n{i}", cores=8) for i in range(4)], options=options)
    engine = WholeQueue()
    for step in range(4):
        for number in range(12):
            account = f"acct{number % 3}"
            serial = f"j{step}-{number:02d}"
            engine.add(job(serial, cores=1, submitted_at=float(step), account=account))
        expected = whole.schedule(list(engine.jobs.values()), float(step))
        result = told.schedule_changes(engine.changes(), engine.pending, float(step))
        assert summary(result) == summary(expected)
        engine.placed(result)
    held = {account: (h.cores, h.memory, h.jobs) for account, h in told._fair.running.items()}
    assert held == {a: (h.cores, h.memory, h.jobs) for a, h in whole._fair.running.items()}
    assert sum(jobs for _, _, jobs in held.values()) == 32


def test_the_queue_in_c_follows_the_copy_through_arrivals_removals_and_placements():
    rng = random.Random(5)
    jobs = [
        job(f"j{n:03d}", cores=rng.choice([1, 2, 3]), submitted_at=float(rng.randrange(50)))
        for n in range(120)
    ]
    copy = default._QueueCopy(jobs[:40])
    for request in jobs[40:]:
        copy.add(request)
        if rng.random() < 0.3:
            copy.remove(rng.choice(copy.ordered).id)
        if rng.random() < 0.1:
            placed_at = sorted(rng.sample(range(len(copy.ordered)), 5))
            placements = [default.Placement(copy.ordered[p].id, ("n",)) for p in placed_at]
            copy.remove_placed(placements, placed_at)
    assert lib.fi_queue_count(copy.queue) == len(copy.ordered)
    # each shape's first job: where a walk that passes over every other shape stops
    runs = QueueRuns()
    shapes = {id(request.shape): request.shape for request in copy.ordered}
    full = ffi.new("int32_t[4]")
    for shape_id in shapes:
        runs.clear()
        for other in shapes:
            if other != shape_id:
                runs.settle(other)
        runs.bind(ffi.NULL, ffi.NULL, copy.queue, full)
        assert lib.fi_place_run(runs.table, 0, 0.0, 0, 0.0, ffi.NULL, 0) == 0
        first = next(p for p, r in enumerate(copy.ordered) if id(r.shape) == shape_id)
        assert runs.stop[0] == first


def test_charges_of_a_run_in_one_call_equal_charges_one_by_one():
    one_by_one, together = FairShare(FairShareConfig()), FairShare(FairShareConfig())
    request = job("j", cores=3, memory_gib=2, gpus=1, account="a")
    usage = (3, 2 << 30, (("nvidia.com/gpu", 1),))
    for _ in range(7):
        one_by_one.charge(request, usage)
    together.charge_many(request, usage, 7)
    held, expected = together.running["a"], one_by_one.running["a"]
    assert (held.cores, held.memory, held.jobs, held.devices) == (
        expected.cores,
        expected.memory,
        expected.jobs,
        expected.devices,
    )
    assert together.organization == one_by_one.organization
