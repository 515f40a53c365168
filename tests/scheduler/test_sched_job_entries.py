"""Running jobs' records in C (issue 19, eighteenth scheduler round): each job's entry on each
of its nodes (its node slot, cores and memory) kept by the node index's book, listed per node
oldest first, made by the call that places a one-node job (``fi_place``, its number in
``where[3]``) and forgotten, with the job's end unlisted and its node moved, by one call that
releases it by that number (``fi_release_entry``, NodeIndex.release_entry); an indexed
node's free cores and memory read from the C index, with no copy kept beside them. Nineteenth
round: each entry keeps its job's id (copied by the placing call) and its usage as a number
of the index's usage table, so a placement writes no Python object and the release by entry
unlists the job's end by the entry's own copy of its id."""

import random

import pytest
from support.scheduler_cluster import GPU, GiB, node

from fuzzball_plugins.schedulers._free_index import lib
from fuzzball_plugins.schedulers.node_index import ClassList, NodeIndex, Usage
from fuzzball_plugins.schedulers.timeline import EndsByClass

#: ids the book copies: short, exactly its inline room (16 bytes), longer, non-ASCII, a lone
#: surrogate (as the ends store encodes it) and one holding a NUL byte
_IDS = ("j", "j" * 16, "j" * 17, "jöb-ü-" * 5, "j\udc80x", "j\x00k")


def _encoded(job_id: str) -> bytes:
    return job_id.encode("utf-8", "surrogatepass")


def test_random_placements_and_releases_keep_the_book_equal_to_a_python_model():
    rng = random.Random(7)
    index = NodeIndex()
    for number in range(12):
        gpus = 2 if number % 3 == 0 else 0
        index.upsert(node(f"n{number:02}", cores=8, memory_gib=32, gpus=gpus))
    ends = EndsByClass()
    classes = sorted(index.classes.values(), key=lambda cls: cls.cap_key)
    # the model: node id -> job id -> usage, in the order the jobs came
    model: dict[str, dict[str, Usage]] = {node_id: {} for node_id in index.nodes}
    running: dict[str, tuple[str, int, int, float]] = {}
    for step in range(1500):
        if running and rng.random() < 0.45:
            job_id = rng.choice(sorted(running))
            node_id, entry, number, end = running.pop(job_id)
            data = _encoded(job_id)
            index.release_entry(entry, node_id, job_id, ends.store, number, end, data)
            del model[node_id][job_id]
        else:
            job_id = f"{rng.choice(_IDS)}{step}"
            gpus = rng.choice([0, 0, 1])
            cores, memory = rng.randint(1, 4), rng.randint(0, 8) * GiB
            usage: Usage = (cores, memory, ((GPU, gpus),) if gpus else ())
            plan = ClassList(
                [
                    (cls, (gpus, cores) if cls.device_kinds else (cores,))
                    for cls in classes
                    if cls.device_kinds or not gpus
                ]
            )
            end = float(rng.randint(1, 50))
            placed = index.place(
                plan, 0, job_id, usage, ends=ends.store, end=end, data=_encoded(job_id)
            )
            if placed is None:
                continue
            running[job_id] = (placed.id, index.where[3], placed.cls.number, end)
            model[placed.id][job_id] = usage
        for node_id, jobs in model.items():
            indexed = index.nodes[node_id]
            cls = indexed.cls
            used_cores = sum(usage[0] for usage in jobs.values())
            used_memory = sum(usage[1] for usage in jobs.values())
            used_gpus = sum(count for usage in jobs.values() for _, count in usage[2])
            assert index.jobs_of(indexed) == jobs and list(indexed.jobs) == list(jobs)
            assert indexed.job_count() == len(jobs)
            assert indexed.free_cores == cls.cap_cores - used_cores
            assert indexed.free_memory == cls.cap_memory - used_memory
            assert indexed.free_key()[:-1] == tuple(count - used_gpus for count in cls.cap_devices)
        idle = {n.id for cls in classes for n in index.idle_nodes(cls)}
        assert idle == {node_id for node_id, jobs in model.items() if not jobs}
    assert sum(ends.count(cls.number) for cls in classes) == len(running)


def _node_a_running_j1():
    """An index of one node "a" (8 cores, 32 GiB) running job "j1" (2 cores, 1 GiB, ending at
    9.0), its class, the ends store it is listed in, and the plan that placed it."""
    index = NodeIndex()
    index.upsert(node("a", cores=8, memory_gib=32))
    cls = index.nodes["a"].cls
    ends = EndsByClass()
    plan = ClassList([(cls, (2,))])
    index.place(plan, 0, "j1", (2, GiB, ()), ends=ends.store, end=9.0, data=b"j1")
    return index, cls, ends, plan


def test_a_released_entry_is_forgotten_and_its_number_taken_by_the_next_job():
    index, cls, ends, plan = _node_a_running_j1()
    first = index.where[3]
    index.release_entry(first, "a", "j1", ends.store, cls.number, 9.0, b"j1")
    assert index.jobs_of(index.nodes["a"]) == {}
    assert ends.count(cls.number) == 0
    index.place(plan, 0, "j2", (3, GiB, ()), ends=ends.store, end=9.0, data=b"j2")
    assert index.where[3] == first
    assert index.usage_at(first) == (3, GiB, ())


def test_a_placed_job_on_a_node_held_since_is_released_by_the_python_path():
    index, cls, ends, _ = _node_a_running_j1()
    entry = index.where[3]
    held = index.upsert(node("a", cores=8, memory_gib=32, ready=False))
    assert not held.in_index and held.free_cores == 6
    # its end stays listed under the class it was placed in (the scheduler lists it under
    # a new class too when the node moves to one)
    index.release_entry(entry, "a", "j1", ends.store, cls.number, 9.0, b"j1")
    assert (held.free_cores, held.free_memory, held.job_count()) == (8, 32 * GiB, 0)
    assert ends.count(cls.number) == 0


def test_an_indexed_nodes_free_cores_are_the_c_index_s_and_cannot_be_set_beside_it():
    index = NodeIndex()
    placed = index.upsert(node("a", cores=8, memory_gib=32))
    index.add_job(placed, "j1", (3, 2 * GiB, ()), False)
    assert (placed.free_cores, placed.free_memory) == (5, 30 * GiB)
    with pytest.raises(RuntimeError):
        placed.free_cores = 1


def test_an_entry_keeps_its_jobs_id_and_usage_whatever_the_ids_length_or_characters():
    index = NodeIndex()
    index.upsert(node("a", cores=64, memory_gib=64))
    cls = index.nodes["a"].cls
    plan = ClassList([(cls, (1,))])
    usages = [(1, GiB * (at + 1), ()) for at in range(len(_IDS))]
    for job_id, usage in zip(_IDS, usages, strict=True):
        # no data given: the placement encodes the id itself
        assert index.place(plan, 0, job_id, usage) is not None
    assert index.jobs_of(index.nodes["a"]) == dict(zip(_IDS, usages, strict=True))
    assert index.usage_of(index.nodes["a"], "j" * 17) == usages[2]


def test_the_release_by_entry_unlists_the_end_by_the_entrys_own_copy_of_the_id():
    index = NodeIndex()
    index.upsert(node("a", cores=64, memory_gib=64))
    cls = index.nodes["a"].cls
    ends = EndsByClass()
    plan = ClassList([(cls, (1,))])
    entries = {}
    for job_id in _IDS:
        index.place(plan, 0, job_id, (1, GiB, ()), ends=ends.store, end=5.0, data=_encoded(job_id))
        entries[job_id] = index.where[3]
    # the C call itself, given the entry, the class and the end, not the id
    assert lib.fi_release_entry(index.book, entries["jöb-ü-" * 5], ends.store, cls.number, 5.0) == 0
    assert lib.fi_release_entry(index.book, entries["j" * 17], ends.store, cls.number, 5.0) == 0
    left = [job_id for job_id in _IDS if job_id not in ("jöb-ü-" * 5, "j" * 17)]
    assert [ids for _, ids in ends.walk([cls])] == [sorted(left, key=_encoded)]
    assert list(index.nodes["a"].jobs) == left


def test_placements_of_one_usage_share_its_number_in_the_index_table():
    index = NodeIndex()
    index.upsert(node("a", cores=64, memory_gib=64))
    cls = index.nodes["a"].cls
    plan = ClassList([(cls, (2,))])
    usage: Usage = (2, GiB, ())
    number = index.usage_number(usage)
    for at in range(3):
        index.place(plan, 0, f"j{at}", (2, GiB, ()), usage_number=number)
        assert lib.fi_entry_usage(index.book, index.where[3]) == number
    assert index.usage_number((2, GiB, ())) == number
    assert index.usage_number((3, GiB, ())) == number + 1
