"""The free-capacity index in C (plugins/schedulers/csrc/free_index.c), through NodeIndex: best
fit by free key then free memory then node id, nodes moved by placements and releases, keys
that empty and come back, nodes that change class or are renumbered (issue 19)."""

import random

from support.scheduler_cluster import GPU, GiB, node

from fuzzball_plugins.schedulers.node_index import IndexedNode, NodeClass, NodeIndex


def only_class(index: NodeIndex) -> NodeClass:
    (cls,) = index.classes.values()
    return cls


def ids(nodes: object) -> list[str]:
    return [n.id for n in nodes]  # type: ignore[attr-defined]


def usage(cores: int, memory_gib: int = 0) -> tuple[int, int, tuple]:
    return (cores, memory_gib * GiB, ())


def fitting(index: NodeIndex, cls: NodeClass, cores: int, memory_gib: int = 0) -> list[str]:
    return ids(index.iter_fitting(cls, (cores,), memory_gib * GiB, False))


def test_nodes_with_equal_free_keys_and_memory_are_taken_in_node_id_order():
    index = NodeIndex()
    for node_id in ["c", "a", "d", "b"]:
        index.upsert(node(node_id, cores=8))
    cls = only_class(index)
    first = index.first_fit(cls, (2,), GiB)
    assert first is not None and first.id == "a"
    assert fitting(index, cls, 2, 1) == ["a", "b", "c", "d"]


def test_the_best_fit_is_the_fewest_free_cores_then_the_least_free_memory():
    index = NodeIndex()
    for node_id in ["a", "b", "c"]:
        index.upsert(node(node_id, cores=8, memory_gib=32))
    index.add_job(index.nodes["a"], "j1", usage(2, 4), False)
    index.add_job(index.nodes["b"], "j2", usage(6, 0), False)
    index.add_job(index.nodes["c"], "j3", usage(2, 16), False)
    cls = only_class(index)
    # b has 2 cores free; a and c 6, c with less memory
    assert fitting(index, cls, 2, 1) == ["b", "c", "a"]
    assert fitting(index, cls, 3, 20) == ["a"]


def test_a_key_whose_last_node_left_is_gone_and_comes_back_with_the_next():
    index = NodeIndex()
    index.upsert(node("a", cores=8))
    index.upsert(node("b", cores=8))
    cls = only_class(index)
    index.add_job(index.nodes["a"], "j1", usage(4), False)
    assert fitting(index, cls, 4) == ["a", "b"]
    index.remove_job(index.nodes["a"], "j1")
    assert fitting(index, cls, 4) == ["a", "b"]
    assert fitting(index, cls, 5) == ["a", "b"]
    index.add_job(index.nodes["b"], "j2", usage(4), False)
    assert fitting(index, cls, 5) == ["a"]


def test_a_full_node_is_found_by_no_search():
    index = NodeIndex()
    index.upsert(node("a", cores=4))
    cls = only_class(index)
    index.add_job(index.nodes["a"], "j1", usage(4), False)
    assert index.first_fit(cls, (1,), 0) is None
    assert fitting(index, cls, 1) == []
    assert cls.indexed == 1


def test_a_node_registered_again_with_other_capacity_moves_to_its_new_class():
    index = NodeIndex()
    index.upsert(node("a", cores=8))
    index.upsert(node("b", cores=8))
    small = only_class(index)
    index.upsert(node("a", cores=32))
    big = index.nodes["a"].cls
    assert big is not small
    assert fitting(index, small, 1) == ["b"]
    assert fitting(index, big, 16) == ["a"]
    assert small.indexed == 1 and big.indexed == 1


def test_a_running_job_moves_with_its_node_to_the_new_class():
    index = NodeIndex()
    index.upsert(node("a", cores=8))
    index.add_job(index.nodes["a"], "j1", usage(6), False)
    index.upsert(node("a", cores=16))
    cls = index.nodes["a"].cls
    assert fitting(index, cls, 10) == ["a"]
    assert fitting(index, cls, 11) == []
    index.remove_job(index.nodes["a"], "j1")
    assert fitting(index, cls, 16) == ["a"]


def test_a_removed_nodes_slot_serves_the_next_node_without_a_trace_of_the_old():
    index = NodeIndex()
    index.upsert(node("a", cores=8))
    index.upsert(node("b", cores=8))
    index.remove("a")
    index.upsert(node("c", cores=8))
    assert fitting(index, only_class(index), 1) == ["b", "c"]


def test_nodes_registered_between_neighbours_until_renumbered_keep_node_id_order():
    index = NodeIndex()
    index.upsert(node("a", cores=8))
    index.upsert(node("b", cores=8))
    # each new id lands between "a" and the last one: the rank gap halves until none is
    # left and every node is renumbered, entries included
    names = ["a" + "0" * depth + "1" for depth in range(24)]
    for name in reversed(names):
        index.upsert(node(name, cores=8))
    index.add_job(index.nodes["b"], "j1", usage(1), False)
    cls = only_class(index)
    assert fitting(index, cls, 1) == ["b", "a", *sorted(names)]
    ranks = [index.nodes[name].rank for name in ["a", *sorted(names), "b"]]
    assert ranks == sorted(ranks)


def test_a_walk_longer_than_one_batch_yields_every_fitting_node_once_in_order():
    index = NodeIndex()
    names = [f"n{number:04d}" for number in range(600)]
    for name in names:
        index.upsert(node(name, cores=8))
    cls = only_class(index)
    walk = index.iter_fitting(cls, (1,), 0, False)
    first: IndexedNode = next(walk)
    # another walk between two batches of the first leaves the first where it was
    assert fitting(index, cls, 1)[:3] == names[:3]
    assert [first.id, *ids(walk)] == names


def test_a_survey_walk_counts_each_node_under_what_it_lacks_first():
    index = NodeIndex()
    for node_id in ["a", "b", "c", "d"]:
        index.upsert(node(node_id, cores=8, memory_gib=16, gpus=2))
    index.add_job(index.nodes["a"], "j1", (6, 0, (("nvidia.com/gpu", 0),)), False)
    index.add_job(index.nodes["b"], "j2", (0, 12 * GiB, (("nvidia.com/gpu", 2),)), False)
    index.add_job(index.nodes["c"], "j3", (0, 12 * GiB, ()), False)
    cls = index.nodes["a"].cls
    # need 4 cores, 8 GiB, 1 GPU: a lacks cores; b lacks a GPU and memory (counted under
    # memory, as a node lacking only memory would be); c lacks memory; d has room
    lacking, ranks, near = index.scan_free(cls, (1, 4), 8 * GiB)
    assert lacking == [0, 1, 2]  # GPUs, cores, memory
    assert [index.by_rank[rank].id for rank in ranks] == ["d"]
    assert near is not None
    score, key, memory, rank = near
    # a lacks half the cores asked, c half the memory (b more): the tie goes to the least id
    assert (score, index.by_rank[rank].id) == (0.5, "a")
    assert (key, memory) == ((2, 2), 16 * GiB)


def test_a_survey_walk_of_a_class_where_every_node_has_room_names_no_closest_node():
    index = NodeIndex()
    index.upsert(node("a", cores=8))
    lacking, ranks, near = index.scan_free(only_class(index), (2,), GiB)
    assert (lacking, len(ranks), near) == ([0, 0], 1, None)


def best_fit_order(index: NodeIndex, cores: int, memory: int) -> list[str]:
    """What the index must answer, worked out from the nodes themselves: every node with
    room, by free key, then free memory, then node id."""
    nodes = index.nodes.values()
    with_room = [n for n in nodes if n.free_cores >= cores and n.free_memory >= memory]
    return ids(sorted(with_room, key=lambda n: (n.free_key(), n.free_memory, n.id)))


def test_keys_of_hundreds_of_nodes_answer_in_best_fit_order_through_many_moves():
    # 700 nodes moved among a few free keys, each key holding hundreds of entries that
    # nodes enter and leave at every position of its order
    rng = random.Random(7)
    index = NodeIndex()
    for number in range(700):
        index.upsert(node(f"n{number:04d}", cores=8, memory_gib=64))
    cls = only_class(index)
    running: list[tuple[IndexedNode, str]] = []
    for step in range(6000):
        if running and (rng.random() < 0.45 or len(running) > 1500):
            target, job_id = running.pop(rng.randrange(len(running)))
            index.remove_job(target, job_id)
        else:
            target = index.nodes[f"n{rng.randrange(700):04d}"]
            if target.free_cores >= 2 and target.free_memory >= 8 * GiB:
                job = f"j{step}"
                index.add_job(target, job, usage(rng.choice([1, 2]), rng.choice([0, 8])), False)
                running.append((target, job))
        if step % 500 == 0:
            for cores, memory in [(1, 0), (2, 8 * GiB), (6, 32 * GiB), (8, 64 * GiB)]:
                expected = best_fit_order(index, cores, memory)
                assert fitting(index, cls, cores, memory // GiB) == expected
                first = index.first_fit(cls, (cores,), memory)
                assert (first.id if first else None) == (expected[0] if expected else None)
                lacking, ranks, _ = index.scan_free(cls, (cores,), memory)
                assert sorted(index.by_rank[rank].id for rank in ranks) == sorted(expected)
                assert sum(lacking) + len(ranks) == len(index.nodes)


def test_jobs_with_devices_move_their_nodes_by_every_key_component_and_keep_the_idle_order():
    # a job with devices moves its node in one call (fi_shift_key): its free key, memory,
    # job count and place among the idle nodes as leaving the index and coming back would
    rng = random.Random(11)
    index = NodeIndex()
    for number in range(60):
        index.upsert(node(f"g{number:02d}", cores=16, memory_gib=64, gpus=4))
    cls = only_class(index)
    # the test's own record of the order nodes became idle (all idle at first, by slot)
    idle = [f"g{number:02d}" for number in range(60)]
    running: list[tuple[IndexedNode, str]] = []
    for step in range(3000):
        if running and (rng.random() < 0.45 or len(running) > 120):
            target, job_id = running.pop(rng.randrange(len(running)))
            index.remove_job(target, job_id)
            if not target.jobs:
                idle.append(target.id)
        else:
            target = index.nodes[f"g{rng.randrange(60):02d}"]
            gpus, cores = rng.choice([1, 2]), rng.choice([1, 4])
            if target.free_devices[0] >= gpus and target.free_cores >= cores:
                job = f"j{step}"
                if not target.jobs:
                    idle.remove(target.id)
                index.add_job(target, job, (cores, 8 * GiB, ((GPU, gpus),)), False)
                running.append((target, job))
        if step % 250 == 0:
            assert ids(index.idle_nodes(cls)) == idle
            for key, memory in [((1, 1), 0), ((2, 4), 8 * GiB), ((4, 16), 64 * GiB)]:
                with_room = [n for n in index.nodes.values() if n.fits(key, memory)]
                expected = ids(sorted(with_room, key=lambda n: (n.free_key(), n.free_memory, n.id)))
                assert ids(index.iter_fitting(cls, key, memory, False)) == expected
    for target, job_id in running:
        index.remove_job(target, job_id)
    assert index.idle_count(cls) == 60
    assert all(n.free_key() == (4, 16) and n.free_memory == 64 * GiB for n in index.nodes.values())
