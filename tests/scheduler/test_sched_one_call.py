"""The scheduler's data model in C, tenth round (issue 19): a one-node job placed by one C call
over its plan's classes (``fi_place``, NodeIndex.place), the jobs counted per node and each
class's idle nodes kept by the C index, and the scheduler placing through that call exactly as
through the search it replaces; thirteenth round: the nodes of a job of several nodes or an
exclusive one listed by one C call (``fi_choose``, NodeIndex.choose), in the search's order."""

import itertools
import random

import pytest
from support.scheduler_cluster import GPU, GiB, cluster, job, node

from fuzzball_core.scheduling import (
    EXCLUSIVE_NODE,
    PLACE_UNTIL,
    JobRequest,
    JobShape,
    QueueChanges,
)
from fuzzball_plugins.schedulers import default
from fuzzball_plugins.schedulers.node_index import ClassList, IndexedNode, NodeClass, NodeIndex


def usage(cores: int, memory_gib: int = 0) -> tuple[int, int, tuple]:
    return (cores, memory_gib * GiB, ())


def classes_by_cores(index: NodeIndex, cores: int) -> ClassList:
    """Every class, smallest nodes first, each asked for ``cores`` cores."""
    ordered = sorted(index.classes.values(), key=lambda cls: cls.cap_cores)
    return ClassList([(cls, (cores,)) for cls in ordered])


def class_of(index: NodeIndex, node_id: str) -> NodeClass:
    return index.nodes[node_id].cls


def idle(index: NodeIndex, cls: NodeClass) -> list[str]:
    return [n.id for n in index.idle_nodes(cls)]


def test_one_call_places_on_the_node_first_fit_names_and_moves_it():
    index = NodeIndex()
    for node_id in ["a", "b", "c"]:
        index.upsert(node(node_id, cores=8, memory_gib=32))
    index.add_job(index.nodes["b"], "j1", usage(4), False)
    plan = classes_by_cores(index, 2)
    expected = index.first_fit(class_of(index, "a"), (2,), GiB)
    placed = index.place(plan, 0, "j2", usage(2, 1))
    assert placed is expected and placed is not None and placed.id == "b"
    assert (placed.free_cores, placed.free_memory) == (2, 31 * GiB)
    assert set(placed.jobs) == {"j1", "j2"}
    # the C index moved it: 3 free cores are now too few on b
    later = index.first_fit(class_of(index, "a"), (3,), 0)
    assert later is not None and later.id == "a"


def test_one_call_places_a_job_with_devices_taking_them_off_its_node():
    index = NodeIndex()
    for node_id in ["a", "b"]:
        index.upsert(node(node_id, cores=16, memory_gib=64, gpus=4))
    index.add_job(index.nodes["b"], "j1", (2, GiB, ((GPU, 1),)), False)
    cls = class_of(index, "a")
    plan = ClassList([(cls, (2, 4))])
    placed = index.place(plan, 0, "j2", (4, 2 * GiB, ((GPU, 2),)))
    # best fit: b, with fewer GPUs free; its free key loses the 2 GPUs and 4 cores
    assert placed is not None and placed.id == "b"
    assert (placed.free_devices, placed.free_cores, placed.free_memory) == ([1], 10, 61 * GiB)
    assert set(placed.jobs) == {"j1", "j2"}
    # the C index moved it by the GPUs too: b no longer holds a job of 2 GPUs, a does
    assert [n.id for n in index.iter_fitting(cls, (2, 1), 0, False)] == ["a"]
    assert [n.id for n in index.iter_fitting(cls, (1, 1), 0, False)] == ["b", "a"]
    # and its release gives them back, b idle again last
    index.release("b", "j2")
    index.release("b", "j1")
    assert index.nodes["b"].free_key() == (4, 16)
    assert idle(index, cls) == ["a", "b"]


def test_one_call_tries_the_plans_classes_in_order_from_the_first_not_known_full():
    index = NodeIndex()
    index.upsert(node("small", cores=4))
    index.upsert(node("big", cores=32))
    plan = classes_by_cores(index, 4)
    index.add_job(index.nodes["small"], "filler", usage(4), False)
    placed = index.place(plan, 0, "j", usage(4))
    assert placed is not None and placed.id == "big"
    # the small class had no room: the first class with room is at position 1
    assert index.where[0] == 1
    index.remove_job(index.nodes["small"], "filler")
    # starting past the small class skips it though it has room again
    placed = index.place(plan, 1, "k", usage(4))
    assert placed is not None and placed.id == "big"


def test_one_call_without_room_places_nothing_and_says_every_class_is_full():
    index = NodeIndex()
    index.upsert(node("a", cores=4))
    plan = classes_by_cores(index, 8)
    assert index.place(plan, 0, "j", usage(8)) is None
    assert index.where[0] == plan.count == 1
    assert index.nodes["a"].jobs == {}


def test_one_call_leaves_a_best_fit_kept_for_a_reservation_unmoved():
    index = NodeIndex()
    index.upsert(node("a", cores=8))
    index.upsert(node("b", cores=8))
    plan = classes_by_cores(index, 2)
    kept = index.slots_of(["a"])
    assert index.place(plan, 0, "j", usage(2), kept) is None
    # found (the class has room) but not placed: nothing moved, a stays idle
    assert index.where[0] == 0
    assert index.nodes["a"].jobs == {} and index.nodes["a"].free_cores == 8
    assert idle(index, class_of(index, "a")) == ["a", "b"]


def test_idle_nodes_are_listed_in_the_order_they_became_idle():
    index = NodeIndex()
    for node_id in ["a", "b", "c"]:
        index.upsert(node(node_id, cores=8))
    cls = class_of(index, "a")
    assert idle(index, cls) == ["a", "b", "c"]
    index.add_job(index.nodes["a"], "j1", usage(1), False)
    index.add_job(index.nodes["b"], "j2", usage(1), False)
    index.add_job(index.nodes["b"], "j3", usage(1), False)
    assert idle(index, cls) == ["c"]
    index.remove_job(index.nodes["b"], "j2")
    assert idle(index, cls) == ["c"]  # j3 still runs there
    index.remove_job(index.nodes["b"], "j3")
    index.remove_job(index.nodes["a"], "j1")
    assert idle(index, cls) == ["c", "b", "a"]
    assert index.idle_ids(cls) == ["c", "b", "a"]
    assert index.idle_count(cls) == 3


def test_a_node_placed_on_by_one_call_leaves_the_idle_nodes_and_comes_back_last():
    index = NodeIndex()
    index.upsert(node("a", cores=8))
    index.upsert(node("b", cores=8))
    plan = classes_by_cores(index, 8)
    placed = index.place(plan, 0, "j", usage(8))
    assert placed is not None and placed.id == "a"
    cls = class_of(index, "a")
    assert idle(index, cls) == ["b"]
    index.remove_job(placed, "j")
    assert idle(index, cls) == ["b", "a"]


def test_held_removed_and_reregistered_nodes_keep_the_idle_list_true():
    index = NodeIndex()
    for node_id in ["a", "b", "c"]:
        index.upsert(node(node_id, cores=8))
    cls = class_of(index, "a")
    index.add_job(index.nodes["c"], "j", usage(1), False)
    # b leaves the index (not ready), then comes back idle: last
    index.upsert(node("b", cores=8, ready=False))
    assert idle(index, cls) == ["a"]
    index.upsert(node("b", cores=8))
    assert idle(index, cls) == ["a", "b"]
    # c registered again with its job running: still not idle
    index.upsert(node("c", cores=8))
    assert idle(index, cls) == ["a", "b"]
    index.remove("a")
    assert idle(index, cls) == ["b"]
    # an exclusive job takes its node out of the index, and its end brings it back idle
    index.add_job(index.nodes["b"], "x", usage(8), True)
    assert idle(index, cls) == [] and index.idle_count(cls) == 0
    index.remove_job(index.nodes["b"], "x")
    assert idle(index, cls) == ["b"]


def test_an_idle_walk_longer_than_one_batch_yields_every_idle_node_once_in_order():
    index = NodeIndex()
    names = [f"n{i:04d}" for i in range(600)]
    for node_id in names:
        index.upsert(node(node_id, cores=4))
    cls = class_of(index, names[0])
    walk = index.idle_nodes(cls)
    first = [next(walk).id for _ in range(10)]
    # another walk between this one's batches does not disturb it
    assert index.idle_ids(cls) == names
    assert first + [n.id for n in walk] == names


def test_a_plan_with_a_class_taking_one_job_at_a_time_or_closing_is_not_placed_by_one_call():
    scheduler = cluster(
        node("whole", cores=8, annotations={EXCLUSIVE_NODE: "true"}),
        node("plain", cores=16),
    )
    result = scheduler.schedule([job("j", cores=1)], now=0)
    assert result.placements[0].node_ids == ("whole",)
    assert all(plan.fast is None for plan in scheduler._plans.values())
    closing = cluster(node("ttl", cores=8, annotations={PLACE_UNTIL: "1000"}))
    result = closing.schedule([job("k", cores=1, runtime=10)], now=0)
    assert result.placements[0].node_ids == ("ttl",)
    assert all(plan.fast is None for plan in closing._plans.values())


def test_a_backfilled_job_whose_best_fit_is_reserved_goes_where_the_search_sends_it():
    scheduler = cluster(node("a", cores=16), node("b", cores=16))
    scheduler.allocate(job("ra", cores=10, runtime=100), ["a"], started_at=0)
    scheduler.allocate(job("rb", cores=8, runtime=200), ["b"], started_at=0)
    # head waits for a (free at 100). A 4-core job running past 100 fits best on a (6 free
    # against 8) but a keeps no room beyond head's: it goes to b. A 6-core job ending before
    # 100 cannot delay head: it takes its best fit, a.
    result = scheduler.schedule(
        [
            job("head", cores=16, submitted_at=0),
            job("long", cores=4, submitted_at=1, runtime=1000),
            job("short", cores=6, submitted_at=2, runtime=50),
        ],
        now=10,
    )
    assert result.reservation is not None and result.reservation.node_ids == ("a",)
    placed = {p.job_id: p.node_ids for p in result.placements}
    assert placed == {"long": ("b",), "short": ("a",)}


def searched(
    scheduler: default.DefaultScheduler,
    shape: JobShape,
    plan: default._Plan,
    protection: default._Protection | None,
) -> list[IndexedNode] | None:
    """``DefaultScheduler._choose`` as the search's generators answer it: the first nodes
    ``_fitting`` yields."""
    chosen = list(itertools.islice(scheduler._fitting(shape, plan, protection), shape.nodes))
    return chosen if len(chosen) == shape.nodes else None


def churn_placements(
    one_call: bool, monkeypatch: pytest.MonkeyPatch, accounts: int, listed: bool = True
) -> list[tuple[object, ...]]:
    """Every pass's placements and reservation over a random workload, placed through the
    one C call or (``one_call`` false) through the search alone, the nodes of jobs of
    several nodes and exclusive ones listed by one C call or (``listed`` false) by the
    search's generators."""
    monkeypatch.setattr(default, "_one_call", default._one_call if one_call else lambda s: False)
    if not listed:
        monkeypatch.setattr(default.DefaultScheduler, "_choose", searched)
    rng = random.Random(7)
    scheduler = cluster(
        *[node(f"n{i:02d}", cores=rng.choice([4, 8, 16]), memory_gib=32) for i in range(30)],
        node("x0", cores=8, annotations={EXCLUSIVE_NODE: "true"}),
        node("g0", cores=16, gpus=2),
        options={"fair_share": {"enabled": accounts > 1}},
    )
    running: list[tuple[float, str]] = []
    pending: dict[str, JobRequest] = {}
    decided = []
    queued = 0
    for step in range(60):
        now = step * 10.0
        for end, job_id in sorted(running):
            if end <= now:
                scheduler.release(job_id)
                running.remove((end, job_id))
        arrived = [
            job(
                f"j{queued + i:04d}",
                cores=rng.choice([1, 2, 4, 8, 16]),
                memory_gib=rng.choice([1, 4, 16]),
                gpus=rng.choice([0, 0, 0, 1]),
                nodes=rng.choice([1, 1, 1, 2]),
                exclusive=rng.random() < 0.05,
                runtime=rng.choice([30.0, 60.0, 200.0, None]),
                submitted_at=now,
                account=f"acct{rng.randrange(accounts)}",
            )
            for i in range(rng.randrange(2, 8))
        ]
        queued += len(arrived)
        pending.update((j.id, j) for j in arrived)
        changes = QueueChanges(step, arrived, (), len(pending))
        result = scheduler.schedule_changes(changes, lambda: list(pending.values()), now)
        for placement in result.placements:
            del pending[placement.job_id]
            running.append((now + rng.choice([15.0, 45.0, 120.0]), placement.job_id))
        decided.append(
            (
                [(p.job_id, p.node_ids) for p in result.placements],
                result.reservation,
                sorted((job_id, repr(d)) for job_id, d in result.diagnoses.items()),
            )
        )
    return decided


@pytest.mark.parametrize("accounts", [1, 3])
def test_the_one_call_places_reserves_and_diagnoses_as_the_search_does(monkeypatch, accounts):
    searched = churn_placements(False, monkeypatch, accounts)
    one_call = churn_placements(True, monkeypatch, accounts)
    assert sum(len(placed) for placed, _, _ in one_call) > 100
    assert one_call == searched


@pytest.mark.parametrize("accounts", [1, 3])
def test_the_listed_nodes_place_reserve_and_diagnose_as_the_search_s_generators(
    monkeypatch, accounts
):
    by_generators = churn_placements(True, monkeypatch, accounts, listed=False)
    monkeypatch.undo()
    listed = churn_placements(True, monkeypatch, accounts)
    several = [placed for passed, _, _ in listed for placed in passed if len(placed[1]) > 1]
    assert len(several) > 20
    assert listed == by_generators


def plan_of(index: NodeIndex, cores: int) -> tuple[ClassList, list[NodeClass]]:
    ordered = sorted(index.classes.values(), key=lambda cls: cls.cap_cores)
    return ClassList([(cls, (cores,)) for cls in ordered]), ordered


def test_listed_nodes_come_class_by_class_each_in_best_fit_order():
    index = NodeIndex()
    for name, cores in [("a", 8), ("b", 8), ("c", 8), ("d", 16), ("e", 16)]:
        index.upsert(node(name, cores=cores))
    index.add_job(index.nodes["b"], "j1", usage(5), False)
    index.add_job(index.nodes["e"], "j2", usage(10), False)
    index.add_job(index.nodes["c"], "j3", usage(7), False)
    plan, ordered = plan_of(index, 2)
    walked = [n.id for cls in ordered for n in index.iter_fitting(cls, (2,), GiB, False)]
    # b (3 free) before a (8); c (1 free) has no room; then e (6) before d (16)
    assert walked == ["b", "a", "e", "d"]
    assert [n.id for n in index.choose(plan, GiB, False, 10)] == walked


def test_listed_nodes_stop_at_the_room_asked():
    index = NodeIndex()
    for name in ["a", "b", "c"]:
        index.upsert(node(name, cores=8))
    plan, _ = plan_of(index, 1)
    assert [n.id for n in index.choose(plan, 0, False, 2)] == ["a", "b"]
    assert index.choose(plan, 0, False, 0) == []


def test_an_exclusive_jobs_listed_nodes_are_each_class_s_idle_nodes_in_the_order_they_became_idle():
    index = NodeIndex()
    for name, cores in [("a", 8), ("b", 8), ("c", 8), ("d", 16)]:
        index.upsert(node(name, cores=cores))
    index.add_job(index.nodes["a"], "j1", usage(1), False)
    index.add_job(index.nodes["b"], "j2", usage(1), False)
    index.remove_job(index.nodes["a"], "j1")
    plan, _ = plan_of(index, 8)
    # a came back idle after c; b runs a job; d is of the larger class
    assert [n.id for n in index.choose(plan, 0, True, 10)] == ["c", "a", "d"]


def test_a_listing_longer_than_its_first_buffer_lists_every_node():
    index = NodeIndex()
    names = [f"n{number:03d}" for number in range(100)]
    for name in names:
        index.upsert(node(name, cores=8))
    plan, _ = plan_of(index, 1)
    assert [n.id for n in index.choose(plan, 0, False, 5)] == names[:5]
    assert [n.id for n in index.choose(plan, 0, False, 1000)] == names
