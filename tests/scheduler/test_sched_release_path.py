"""A release's and a placement's bookkeeping in fewer calls (issue 19, fourteenth scheduler
round): the node index releases a job by its node's id in one call, an end is added and
removed by EndsByClass without a call per class list in the usual cases (and still walked in
id order), and a pass over a plain queue notes the positions of the jobs it places as it
places them."""

import math
from types import SimpleNamespace
from typing import cast

import pytest
from support.scheduler_cluster import GiB, cluster, job, node

from fuzzball_core.scheduling import QueueChanges
from fuzzball_plugins.schedulers.node_index import NodeClass, NodeIndex
from fuzzball_plugins.schedulers.timeline import EndsByClass


def test_releasing_by_node_id_gives_back_what_the_job_took():
    index = NodeIndex()
    index.upsert(node("a", cores=8, memory_gib=32))
    index.add_job(index.nodes["a"], "j1", (3, 4 * GiB, ()), False)
    index.add_job(index.nodes["a"], "j2", (2, 1 * GiB, ()), False)
    index.release("a", "j1")
    placed = index.nodes["a"]
    assert (placed.free_cores, placed.free_memory, set(placed.jobs)) == (6, 31 * GiB, {"j2"})
    # the C index moved it: 6 free cores are found again
    found = index.first_fit(placed.cls, (6,), 0)
    assert found is placed


def test_releasing_a_job_a_node_does_not_run_or_an_unknown_node_changes_nothing():
    index = NodeIndex()
    index.upsert(node("a", cores=8, memory_gib=32))
    index.add_job(index.nodes["a"], "j1", (3, 4 * GiB, ()), False)
    index.release("a", "ghost")
    index.release("nowhere", "j1")
    placed = index.nodes["a"]
    assert (placed.free_cores, placed.free_memory, set(placed.jobs)) == (5, 28 * GiB, {"j1"})


def test_removing_a_job_a_node_does_not_run_is_a_key_error():
    index = NodeIndex()
    index.upsert(node("a"))
    with pytest.raises(KeyError):
        index.remove_job(index.nodes["a"], "ghost")


def test_releasing_an_exclusive_job_brings_its_node_back_idle():
    index = NodeIndex()
    index.upsert(node("a", cores=8, memory_gib=32))
    index.add_job(index.nodes["a"], "whole", (8, 32 * GiB, ()), True)
    assert not index.nodes["a"].in_index
    index.release("a", "whole")
    back = index.nodes["a"]
    assert back.in_index and back.exclusive_job is None
    assert [n.id for n in index.idle_nodes(back.cls)] == ["a"]


def test_ends_added_out_of_order_are_walked_in_id_order_and_their_removal_empties_the_class():
    small = cast(NodeClass, SimpleNamespace(number=0))
    ends = EndsByClass()
    for end, job_id in [(10.0, "j2"), (10.0, "j3"), (10.0, "j1"), (math.inf, "j0")]:
        ends.add(small.number, end, job_id)
    assert [(end, list(ids)) for end, ids in ends.walk([small])] == [
        (10.0, ["j1", "j2", "j3"]),
        (math.inf, ["j0"]),
    ]
    for end, job_id in [(10.0, "j2"), (10.0, "j1"), (math.inf, "j0"), (10.0, "j3")]:
        ends.remove(small.number, end, job_id)
    assert list(ends.walk([small])) == []
    with pytest.raises(KeyError):
        ends.remove(small.number, 10.0, "j3")


def test_a_pass_over_a_plain_queue_keeps_the_waiting_jobs_in_queue_order():
    # two nodes of 4 cores: the 4-core jobs between the small ones wait, the others start
    scheduler = cluster(node("a", cores=4, memory_gib=32), node("b", cores=4, memory_gib=32))
    # a first pass over an empty queue: the scheduler's copy of the queue starts there, and
    # the next pass, told the arrivals, passes over the copy (noting what it places)
    scheduler.schedule_changes(QueueChanges(1, [], (), 0), lambda: [], 0.0)
    sizes = [1, 4, 1, 4, 1, 1, 4]
    jobs = [job(f"j{i}", cores=c, runtime=60.0, submitted_at=i) for i, c in enumerate(sizes)]
    first = scheduler.schedule_changes(QueueChanges(2, jobs, (), len(jobs)), lambda: jobs, 0.0)
    assert [p.job_id for p in first.placements] == ["j0", "j1", "j2", "j4", "j5"]
    assert list(first.diagnoses) == ["j3", "j6"]
    # the copy lost exactly the placed jobs: the next pass, told nothing new, walks the
    # waiting ones in queue order
    waiting = [jobs[3], jobs[6]]
    second = scheduler.schedule_changes(QueueChanges(3, [], (), 2), lambda: waiting, 1.0)
    assert not second.placements
    assert list(second.diagnoses) == ["j3", "j6"]
    assert scheduler._copy is not None and scheduler._copy.ordered == waiting
