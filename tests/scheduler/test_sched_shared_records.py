"""A running job's records (issue 19, twelfth scheduler round): the jobs of a shape placed by
one C call share one usage tuple, an ends bucket takes a job out by its id's hash and is
walked in id order all the same, and the releases give back what the placements took."""

from types import SimpleNamespace
from typing import cast

from support.scheduler_cluster import GiB, cluster, job, node

from fuzzball_core.scheduling import QueueChanges
from fuzzball_plugins.schedulers.node_index import NodeClass
from fuzzball_plugins.schedulers.timeline import EndsByClass

_USAGE = 2


def test_jobs_placed_by_one_call_share_their_shapes_usage():
    scheduler = cluster(*(node(f"n{i}", cores=8, memory_gib=32) for i in range(3)))
    result = scheduler.schedule([job(f"j{i}", cores=2, memory_gib=3) for i in range(6)], now=0)
    assert len(result.placements) == 6
    records = [scheduler._allocations[f"j{i}"] for i in range(6)]
    assert all(record[_USAGE] is records[0][_USAGE] for record in records)
    assert records[0][_USAGE] == (2, 3 * GiB, ())
    for placement in result.placements:
        held = scheduler._index.nodes[placement.node_ids[0]].jobs[placement.job_id]
        assert held == (2, 3 * GiB, ())


def test_releasing_jobs_that_share_records_gives_back_what_each_took():
    scheduler = cluster(node("a", cores=8, memory_gib=32), node("b", cores=8, memory_gib=32))
    jobs = [job(f"j{i}", cores=3, memory_gib=4, runtime=60.0, submitted_at=i) for i in range(4)]
    result = scheduler.schedule_changes(QueueChanges(1, jobs, (), 4), lambda: jobs, 0.0)
    assert len(result.placements) == 4
    for placement in result.placements[:3]:
        scheduler.release(placement.job_id)
    nodes = scheduler._index.nodes
    still = result.placements[3]
    for node_id, indexed in nodes.items():
        running = node_id in still.node_ids
        assert (indexed.free_cores, indexed.free_memory) == (
            (5, 28 * GiB) if running else (8, 32 * GiB)
        )
    # a job that needs both nodes whole waits for the remaining job's end
    jobs = [job("big", cores=8, memory_gib=1, nodes=2, submitted_at=10)]
    result = scheduler.schedule_changes(QueueChanges(2, jobs, (), 1), lambda: jobs, 1.0)
    assert not result.placements
    assert result.diagnoses["big"].estimated_start == 60.0


def test_an_ends_bucket_that_took_ids_out_of_order_is_walked_sorted():
    only = cast(NodeClass, SimpleNamespace(number=0))
    ends = EndsByClass()
    for job_id in ["j5", "j7", "j6"]:
        ends.add(only.number, 30.0, job_id)
    assert list(ends.walk([only])) == [(30.0, ["j5", "j6", "j7"])]
    # the greatest id leaves; a smaller one than it was comes in after the walk
    ends.remove(only.number, 30.0, "j7")
    ends.add(only.number, 30.0, "j65")
    ends.add(only.number, 30.0, "j8")
    assert list(ends.walk([only])) == [(30.0, ["j5", "j6", "j65", "j8"])]
    for job_id in ["j5", "j6", "j65", "j8"]:
        ends.remove(only.number, 30.0, job_id)
    assert ends.count(only.number) == 0 and list(ends.walk([only])) == []
