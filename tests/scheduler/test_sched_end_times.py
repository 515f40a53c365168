"""Running jobs' expected ends kept in C (issue 19, sixteenth scheduler round): per class, the
distinct ends ascending and each end's jobs in id order, walked merged over several classes
with a job on several of them once; a one-node job's end is listed by the C call that places
it and unlisted by the one that releases it."""

import math
import random
from types import SimpleNamespace
from typing import cast

import pytest
from support.scheduler_cluster import GiB, node

from fuzzball_plugins.schedulers.node_index import ClassList, NodeClass, NodeIndex
from fuzzball_plugins.schedulers.timeline import EndsByClass


def classes(count: int) -> list[NodeClass]:
    return [cast(NodeClass, SimpleNamespace(number=number)) for number in range(count)]


def model_walk(listed: dict[tuple[int, str], float], numbers: set[int]) -> list:
    """What a walk over ``numbers`` yields: each end ascending with its jobs' ids sorted,
    a job listed under several of the classes once."""
    by_end: dict[float, set[str]] = {}
    for (number, job_id), end in listed.items():
        if number in numbers:
            by_end.setdefault(end, set()).add(job_id)
    return [(end, sorted(ids)) for end, ids in sorted(by_end.items())]


def test_the_walks_and_counts_follow_a_model_through_random_additions_and_removals():
    rng = random.Random(7)
    kinds = classes(5)
    ends = EndsByClass()
    # short ids kept in the entry, long ones copied, non-ASCII ones and one holding a NUL
    # byte, all in Python's order of str
    names = [f"j{i}" for i in range(60)] + [f"a-much-longer-job-id-{i:04d}" for i in range(40)]
    names += ["é1", "z\u00ff", "\u4e2d", "nul\x00here", "nul", "\U0001f600"]
    listed: dict[tuple[int, str], float] = {}
    for _ in range(3000):
        job_id = rng.choice(names)
        number = rng.randrange(5)
        # a job runs until one end, listed under one or more classes
        mine = [key for key in listed if key[1] == job_id]
        if mine and rng.random() < 0.5:
            key = rng.choice(mine)
            ends.remove(key[0], listed.pop(key), job_id)
        elif (number, job_id) not in listed:
            end = listed[mine[0]] if mine else rng.choice([10.0, 20.0, 30.0, 45.5, math.inf])
            ends.add(number, end, job_id)
            listed[(number, job_id)] = end
        if rng.random() < 0.05:
            asked = set(rng.sample(range(5), rng.randrange(1, 6)))
            walked = [(end, ids) for end, ids in ends.walk([kinds[n] for n in asked])]
            assert walked == model_walk(listed, asked)
            for number in range(5):
                assert ends.count(number) == sum(1 for key in listed if key[0] == number)


def test_removing_a_job_not_listed_so_is_a_key_error():
    ends = EndsByClass()
    ends.add(0, 10.0, "a")
    with pytest.raises(KeyError):
        ends.remove(0, 20.0, "a")
    with pytest.raises(KeyError):
        ends.remove(1, 10.0, "a")
    with pytest.raises(KeyError):
        ends.remove(0, 10.0, "b")
    assert ends.count(0) == 1


def test_an_end_with_more_ids_than_a_walks_first_buffer_is_walked_whole():
    (only,) = classes(1)
    ends = EndsByClass()
    ids = [f"job-with-a-long-id-{i:05d}" for i in range(500)]
    for job_id in reversed(ids):
        ends.add(0, 60.0, job_id)
    assert list(ends.walk([only])) == [(60.0, ids)]


def test_a_job_placed_by_one_call_has_its_end_listed_under_its_nodes_class():
    index = NodeIndex()
    index.upsert(node("a", cores=8, memory_gib=32))
    cls = index.nodes["a"].cls
    ends = EndsByClass()
    placed = index.place(
        ClassList([(cls, (2,))]), 0, "j1", (2, GiB, ()), ends=ends.store, end=90.0, data=b"j1"
    )
    assert placed is index.nodes["a"]
    assert list(ends.walk([cls])) == [(90.0, ["j1"])]


def test_a_release_in_one_call_unlists_the_job_and_gives_its_node_back():
    index = NodeIndex()
    index.upsert(node("a", cores=8, memory_gib=32))
    cls = index.nodes["a"].cls
    ends = EndsByClass()
    plan = ClassList([(cls, (2,))])
    index.place(plan, 0, "j1", (2, GiB, ()), ends=ends.store, end=90.0, data=b"j1")
    index.release_listed("a", "j1", ends.store, cls.number, 90.0, b"j1")
    back = index.nodes["a"]
    assert ends.count(cls.number) == 0
    assert (back.free_cores, back.free_memory, back.jobs) == (8, 32 * GiB, {})
    assert [n.id for n in index.idle_nodes(cls)] == ["a"]
    assert index.first_fit(cls, (8,), 32 * GiB) is back


def test_releasing_a_job_whose_end_is_not_listed_is_a_key_error_after_the_node_is_freed():
    index = NodeIndex()
    index.upsert(node("a", cores=8, memory_gib=32))
    cls = index.nodes["a"].cls
    ends = EndsByClass()
    index.add_job(index.nodes["a"], "j1", (2, GiB, ()), False)
    with pytest.raises(KeyError):
        index.release_listed("a", "j1", ends.store, cls.number, 90.0, b"j1")
    assert index.nodes["a"].free_cores == 8


def test_a_walk_narrowed_after_some_ends_goes_on_over_the_kept_classes_only():
    rng = random.Random(3)
    kinds = classes(4)
    ends = EndsByClass()
    listed: dict[tuple[int, str], float] = {}
    # long ids, many ends: a walk's batches stop short of their ends as the buffer fills
    for i in range(400):
        job_id = f"a-job-with-a-rather-long-id-{i:05d}" * 3
        end = float(rng.randrange(200))
        for number in rng.sample(range(4), rng.randrange(1, 3)):
            ends.add(number, end, job_id)
            listed[(number, job_id)] = end
    for taken in (0, 1, 5, 31, 32, 33, 70):
        walk = ends.walk(kinds)
        first = [next(walk) for _ in range(taken)]
        everything = model_walk(listed, {0, 1, 2, 3})
        assert first == everything[:taken]
        kept = {1, 3}
        walk.keep(kept)
        last = first[-1][0] if first else -1.0
        assert list(walk) == [(end, ids) for end, ids in model_walk(listed, kept) if end > last]
