"""Jobs of several nodes and exclusive ones placed and released by one C call each (issue 19,
twenty-second scheduler round): ``fi_place_nodes`` finds a job of several nodes the nodes
the Python search would choose, moves them, makes and chains its entries and lists its end;
``fi_place_whole`` takes an idle node whole for an exclusive job of one node; their releases
(``fi_release_nodes``, ``fi_release_whole``), and that of a one-node job with devices
(``fi_release_devices``), give back what the book's entries hold. A reserved node among the
first found leaves the choice to the Python search, a node held since its exclusive job
started leaves the release to the Python path."""

import random

import pytest
from support.scheduler_cluster import cluster, job, node

import fuzzball_plugins.schedulers.default as default
from fuzzball_core.scheduling import Hold, JobRequest, NodeInfo, ScheduleResult

HELD = (Hold("cordon", "admin", "maintenance", "root", 0.0),)


class PythonOnly(default.DefaultScheduler):
    """The default scheduler with the one-call placements of jobs of several nodes and of
    exclusive ones off: its plans leave them to :meth:`_find` and :meth:`_record`."""

    def _plan(self, shape):
        plan = super()._plan(shape)
        plan.spread = plan.whole = None
        return plan


def counting(monkeypatch, name: str) -> list[int]:
    """The answers of the C call ``name`` of the scheduler's module, as they are made."""
    answers: list[int] = []
    real = getattr(default, name)

    def counted(*arguments):
        answer = real(*arguments)
        answers.append(answer)
        return answer

    monkeypatch.setattr(default, name, counted)
    return answers


def summary(result: ScheduleResult) -> tuple:
    """What a pass decided, in comparable values."""
    return (
        [(p.job_id, p.node_ids, dict(p.cpus), p.note) for p in result.placements],
        result.reservation,
        [(job_id, repr(d)) for job_id, d in result.diagnoses.items()],
    )


def usages(scheduler: default.DefaultScheduler, node_ids: list[str]) -> list[tuple]:
    """Every node's free capacity, running jobs and exclusive holder."""
    found = []
    for node_id in node_ids:
        usage = scheduler.node_usage(node_id)
        found.append(
            (
                node_id,
                usage.free_cores,
                usage.free_memory,
                dict(usage.free_devices),
                usage.job_ids,
                usage.exclusive_job,
            )
        )
    return found


def _random_job(rng: random.Random, serial: int, now: float) -> JobRequest:
    kind = rng.random()
    return job(
        f"j{serial:04d}",
        cores=rng.choice([1, 2, 4, 8, 12]),
        memory_gib=rng.choice([1, 4, 16]),
        gpus=1 if kind < 0.1 else 0,
        nodes=rng.choice([2, 2, 3, 4]) if 0.1 <= kind < 0.4 else 1,
        exclusive=0.4 <= kind < 0.55 or (0.1 <= kind < 0.13),
        submitted_at=now,
        priority=rng.choice([0, 0, 0, 5]),
        runtime=rng.choice([60.0, 600.0, 1800.0, None]),
    )


def _nodes(held: frozenset[str] = frozenset()) -> list[NodeInfo]:
    infos = [node(f"n{i}", cores=8 + 8 * (i % 3), memory_gib=32) for i in range(10)]
    infos += [node("gpu0", cores=16, gpus=2), node("gpu1", cores=16, gpus=4)]
    return [
        NodeInfo(info.id, info.capacity, info.annotations, HELD if info.id in held else ())
        for info in infos
    ]


@pytest.mark.parametrize("seed", [5, 11, 23, 41])
def test_passes_with_the_one_call_placements_decide_as_passes_in_python(seed, monkeypatch):
    placed_nodes = counting(monkeypatch, "place_nodes")
    placed_whole = counting(monkeypatch, "place_whole")
    released_nodes = counting(monkeypatch, "release_nodes")
    released_whole = counting(monkeypatch, "release_whole")
    released_devices = counting(monkeypatch, "release_devices")
    rng = random.Random(seed)
    told, python = cluster(*_nodes()), PythonOnly()
    for info in _nodes():
        python.upsert_node(info)
    ids = [info.id for info in _nodes()]
    pending: dict[str, JobRequest] = {}
    running: list[str] = []
    held: frozenset[str] = frozenset()
    for step in range(120):
        now = step * 60.0
        for _ in range(rng.randint(0, 8)):
            request = _random_job(rng, len(pending) + 10_000 * step, now)
            pending[request.id] = request
        for _ in range(min(len(running), rng.randint(0, 6))):
            ended = running.pop(rng.randrange(len(running)))
            told.release(ended)
            python.release(ended)
        if rng.random() < 0.1:
            # a hold comes or goes: a node running an exclusive job may be held meanwhile
            held = frozenset(rng.sample(ids, 2)) if rng.random() < 0.6 else frozenset()
            for info in _nodes(held):
                told.upsert_node(info)
                python.upsert_node(info)
        result = told.schedule(list(pending.values()), now)
        expected = python.schedule(list(pending.values()), now)
        assert summary(result) == summary(expected), step
        assert usages(told, ids) == usages(python, ids), step
        for placement in result.placements:
            del pending[placement.job_id]
            running.append(placement.job_id)
    # each C call did its work in this run, and its releases too
    assert [n for n in placed_nodes if n > 0] and [s for s in placed_whole if s >= 0]
    assert released_nodes.count(0) and released_whole.count(0) and released_devices.count(0)


def test_a_job_of_several_nodes_lands_on_the_nodes_the_python_search_chooses(monkeypatch):
    answers = counting(monkeypatch, "place_nodes")
    infos = [node(f"n{i}", cores=16) for i in range(6)]
    told, python = cluster(*infos), PythonOnly()
    for info in infos:
        python.upsert_node(info)
    # best fit first: the nodes with the least room that hold the job
    for scheduler in (told, python):
        scheduler.schedule([job("a", cores=12), job("b", cores=6), job("c", cores=10)], 0.0)
    request = job("wide", cores=4, nodes=3, submitted_at=1.0)
    result = told.schedule([request], 1.0)
    expected = python.schedule([request], 1.0)
    assert answers == [3]
    assert result.placements[0].node_ids == expected.placements[0].node_ids


def test_an_exclusive_job_takes_a_whole_idle_node(monkeypatch):
    answers = counting(monkeypatch, "place_whole")
    scheduler = cluster(node("n0", cores=16, gpus=2), node("n1", cores=16, gpus=2))
    scheduler.schedule([job("small", cores=1)], 0.0)
    result = scheduler.schedule([job("alone", cores=1, exclusive=True)], 1.0)
    (placement,) = result.placements
    usage = scheduler.node_usage(placement.node_ids[0])
    assert answers and answers[0] >= 0
    assert placement.node_ids == ("n1",)
    assert (usage.free_cores, usage.free_memory, dict(usage.free_devices)) == (
        0,
        0,
        {"nvidia.com/gpu": 0},
    )
    assert usage.exclusive_job == "alone"


def test_a_release_of_an_exclusive_job_puts_its_node_back_idle(monkeypatch):
    answers = counting(monkeypatch, "release_whole")
    scheduler = cluster(node("n0", cores=16, gpus=2))
    scheduler.schedule([job("alone", cores=1, exclusive=True)], 0.0)
    scheduler.release("alone")
    usage = scheduler.node_usage("n0")
    assert answers == [0]
    assert (usage.free_cores, usage.free_memory, usage.exclusive_job) == (16, 64 << 30, None)
    # idle again: another exclusive job takes it
    assert scheduler.schedule([job("again", exclusive=True)], 1.0).placements


def test_a_release_of_a_job_of_several_nodes_frees_what_its_entries_hold(monkeypatch):
    answers = counting(monkeypatch, "release_nodes")
    scheduler = cluster(*[node(f"n{i}", cores=16) for i in range(3)])
    result = scheduler.schedule([job("wide", cores=5, memory_gib=3, nodes=3)], 0.0)
    numbers = scheduler._allocations["wide"][3]
    assert [scheduler._ends.count(number) for number in numbers] == [1]
    scheduler.release("wide")
    assert answers == [0]
    assert [scheduler._ends.count(number) for number in numbers] == [0]
    for node_id in result.placements[0].node_ids:
        usage = scheduler.node_usage(node_id)
        assert (usage.free_cores, usage.free_memory, usage.job_ids) == (16, 64 << 30, ())


def test_an_exclusive_job_on_a_node_held_since_is_released_by_the_python_path(monkeypatch):
    answers = counting(monkeypatch, "release_whole")
    scheduler = cluster(node("n0", cores=16))
    scheduler.schedule([job("alone", exclusive=True)], 0.0)
    scheduler.upsert_node(node("n0", cores=16, holds=HELD))
    scheduler.release("alone")
    usage = scheduler.node_usage("n0")
    assert answers == []
    assert (usage.free_cores, usage.exclusive_job, usage.takes_new_work) == (16, None, False)


def test_a_reserved_node_among_the_first_found_leaves_the_choice_to_the_python_search(
    monkeypatch,
):
    answers = counting(monkeypatch, "place_nodes")
    # n0-n2 (16 cores, 64 GiB) come first in a small job's search, n3-n4 (32 cores, 32 GiB)
    # after; n0 runs a job until 100 s and the queue's head needs n0-n2 whole, so it
    # reserves them; a two-node job that would outlast the reservation meets n1 and n2
    # first, and the search that asks the reservation places it on n3 and n4
    infos = [node(f"n{i}", cores=16, memory_gib=64) for i in range(3)]
    infos += [node(f"n{i}", cores=32, memory_gib=32) for i in (3, 4)]
    told, python = cluster(*infos), PythonOnly()
    for info in infos:
        python.upsert_node(info)
    queue = [
        job("head", cores=16, memory_gib=64, nodes=3, runtime=100.0, submitted_at=1.0),
        job("pair", cores=2, nodes=2, runtime=3600.0, submitted_at=2.0),
    ]
    for scheduler in (told, python):
        scheduler.schedule([job("busy", cores=16, runtime=100.0)], 0.0)
    result, expected = told.schedule(queue, 10.0), python.schedule(queue, 10.0)
    # the head: two nodes with room of the three it needs; the pair: a reserved node first
    assert answers == [2, -3]
    assert result.reservation is not None
    assert sorted(result.reservation.node_ids) == ["n0", "n1", "n2"]
    assert [(p.job_id, p.node_ids) for p in result.placements] == [("pair", ("n3", "n4"))]
    assert summary(result) == summary(expected)


def test_a_release_of_a_one_node_job_with_devices_gives_its_devices_back(monkeypatch):
    answers = counting(monkeypatch, "release_devices")
    scheduler = cluster(node("n0", cores=16, gpus=4))
    scheduler.schedule([job("one", cores=2, gpus=3), job("other", cores=1, gpus=1)], 0.0)
    scheduler.release("one")
    usage = scheduler.node_usage("n0")
    assert answers == [0]
    assert (usage.free_cores, dict(usage.free_devices), usage.job_ids) == (
        15,
        {"nvidia.com/gpu": 3},
        ("other",),
    )
    # the index moved with it: a job of three GPUs fits again
    assert scheduler.schedule([job("three", gpus=3)], 1.0).placements
