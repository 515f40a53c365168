"""The estimated starts' replay in C (issue 19, nineteenth scheduler round): the running
jobs' ends walked over the node index's book (``fi_replay``, timeline.replay_starts), each
job given back from its entries (cores, memory and device counts, a job of several nodes
chained from its first), a node out of the index by the state the book was told; every
start equal to the Python replay's (timeline.replay_ends), and the Python replay made when
the book lacks a job's entries."""

import math
import random

import pytest
from support.scheduler_cluster import GPU, GiB, cluster, job, node

import fuzzball_plugins.schedulers.default as default
from fuzzball_plugins.schedulers.node_index import ClassList, NodeIndex
from fuzzball_plugins.schedulers.timeline import (
    EndsByClass,
    StartQuery,
    replay_ends,
    replay_starts,
)


def _nodes(rng: random.Random, held: set[str]):
    for number in range(10):
        gpus = 2 if number % 3 == 0 else 0
        node_id = f"n{number}"
        yield node(node_id, cores=8, memory_gib=32, gpus=gpus, ready=node_id not in held)


def test_the_starts_replayed_in_c_equal_the_python_replays_through_random_passes(monkeypatch):
    rng = random.Random(11)
    held: set[str] = set()
    scheduler = cluster(*_nodes(rng, held))
    compared: list[float | None] = []
    real = default.replay_starts

    def checked(index, ends, asks):
        answered = real(index, ends, asks)
        assert answered is not None
        for (shape, _, seeds), start in zip(asks, answered, strict=True):
            # each question alone, in Python, over the same running jobs
            query = StartQuery(shape, scheduler._plans[shape].keys, dict.fromkeys(seeds))
            replay_ends(index, ends.walk(query.request_keys), scheduler._allocations, [query])
            assert start == query.start, shape
            compared.append(start)
        return answered

    monkeypatch.setattr(default, "replay_starts", checked)
    pending = []
    running: list[str] = []
    now = 0.0
    for step in range(120):
        for at in range(rng.randint(0, 6)):
            kind = rng.random()
            pending.append(
                job(
                    f"j{step}-{at}",
                    cores=rng.randint(1, 8),
                    memory_gib=rng.randint(1, 24),
                    gpus=1 if kind < 0.25 else 0,
                    nodes=2 if 0.2 <= kind < 0.35 else 1,
                    exclusive=0.35 <= kind < 0.45,
                    runtime=rng.choice([None, None, 600.0, 1800.0, 3600.0]),
                    submitted_at=now,
                )
            )
        result = scheduler.schedule(pending, now)
        placed = {placement.job_id for placement in result.placements}
        running += sorted(placed)
        pending = [waiting for waiting in pending if waiting.id not in placed]
        rng.shuffle(running)
        for _ in range(rng.randint(0, 4)):
            if running:
                scheduler.release(running.pop())
        if rng.random() < 0.3:
            # a node held (its jobs give nothing back in a replay) or back again
            held ^= {f"n{rng.randrange(10)}"}
            for info in _nodes(rng, held):
                scheduler.upsert_node(info)
        now += 300.0
    # starts at a job's end, at a job's unknown end (inf) and never (every node held)
    assert sum(start is not None and math.isfinite(start) for start in compared) > 1000
    assert sum(start == math.inf for start in compared) > 100
    assert sum(start is None for start in compared) > 5


def test_a_job_listed_without_its_entry_makes_the_replay_in_python():
    index = NodeIndex()
    index.upsert(node("a", cores=8, memory_gib=32))
    cls = index.nodes["a"].cls
    ends = EndsByClass()
    plan = ClassList([(cls, (8,))])
    index.place(plan, 0, "j1", (8, GiB, ()), ends=ends.store, end=5.0)
    shape = job("w", cores=8).shape
    ask = (shape, ([cls.number], [index.request_array((8,))]), ())
    assert replay_starts(index, ends, [ask]) == [5.0]
    index.add_job(index.nodes["a"], "j2", (0, GiB, ()), False)
    ends.add(cls.number, 3.0, "j2")  # no entry given
    assert replay_starts(index, ends, [ask]) is None


def test_a_gpu_job_gives_its_devices_back_in_the_replay():
    index = NodeIndex()
    index.upsert(node("g", cores=8, memory_gib=32, gpus=2))
    cls = index.nodes["g"].cls
    ends = EndsByClass()
    plan = ClassList([(cls, (2, 1))])
    index.place(plan, 0, "j1", (1, GiB, ((GPU, 2),)), ends=ends.store, end=7.0)
    # cores to spare, but both GPUs held until j1 ends
    shape = job("w", cores=1, gpus=1).shape
    ask = (shape, ([cls.number], [index.request_array((1, 1))]), ())
    assert replay_starts(index, ends, [ask]) == [7.0]


@pytest.mark.parametrize("exclusive", [True, False])
def test_a_node_out_of_the_index_is_replayed_from_the_state_the_book_was_told(exclusive):
    scheduler = cluster(node("a", cores=8, memory_gib=32))
    first = job("x", cores=2, exclusive=exclusive, runtime=900.0)
    scheduler.schedule([first], 0.0)
    waiting = job("w", cores=8, runtime=60.0)
    result = scheduler.schedule([waiting], 10.0)
    assert result.diagnoses["w"].estimated_start == 900.0
