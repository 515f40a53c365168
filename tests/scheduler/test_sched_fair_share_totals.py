"""Fair share's cluster totals are kept between passes and summed again only when a node was
registered, updated or removed (issue 19: each node is a class of its own, so a sum walks
every node, and an idle pass asked for it twice)."""

import random

from support.scheduler_cluster import GPU, job, node

from fuzzball_core.scheduling import NodeInfo
from fuzzball_plugins.schedulers.fair_share import FairShare, FairShareConfig
from fuzzball_plugins.schedulers.node_index import NodeIndex


def fair_share() -> FairShare:
    return FairShare(FairShareConfig.from_options(None))


def test_passes_with_no_node_change_share_one_sum_of_the_cluster():
    index = NodeIndex()
    index.upsert(node("n1", cores=4))
    shares = fair_share()
    first = shares.totals(index)
    shares.queue([job("a-0", account="a")], 1.0, index)
    shares.finish(1.0, index)
    assert shares.totals(index) is first


def test_a_registered_node_counts_in_the_next_pass():
    index = NodeIndex()
    index.upsert(node("n1", cores=4, memory_gib=8))
    shares = fair_share()
    assert shares.totals(index).cores == 4
    index.upsert(node("n2", cores=12, memory_gib=24, gpus=2))
    totals = shares.totals(index)
    assert (totals.cores, totals.memory >> 30, sum(totals.devices.values())) == (16, 32, 2)


def test_an_updated_or_removed_node_counts_in_the_next_pass():
    index = NodeIndex()
    index.upsert(node("n1", cores=4))
    index.upsert(node("n2", cores=4))
    shares = fair_share()
    assert shares.totals(index).cores == 8
    index.upsert(node("n2", cores=8))  # the node came back with more cores
    assert shares.totals(index).cores == 12
    index.remove("n1")
    assert shares.totals(index).cores == 8


def test_another_index_is_summed_on_its_own():
    small, large = NodeIndex(), NodeIndex()
    small.upsert(node("n1", cores=4))
    large.upsert(node("n1", cores=64))
    shares = fair_share()
    assert shares.totals(small).cores == 4
    assert shares.totals(large).cores == 64


def test_the_totals_are_every_registered_nodes_capacity_through_any_churn():
    # kept as nodes come and go (a walk over every class at each change was a third of the
    # loop while 5,000 nodes registered again): after any mix of registrations, updates
    # with another shape, holds and removals they equal a sum over the nodes
    rng = random.Random(7)
    index = NodeIndex()
    shares = fair_share()
    registered: dict[str, NodeInfo] = {}
    for step in range(600):
        node_id = f"n{rng.randrange(40)}"
        if node_id in registered and rng.random() < 0.3:
            index.remove(node_id)
            del registered[node_id]
        else:
            info = node(
                node_id,
                cores=rng.choice((4, 16, 64)),
                memory_gib=rng.choice((8, 64)),
                gpus=rng.choice((0, 0, 4)),
                annotations={"rack": str(step % 3)},
                ready=rng.random() < 0.9,
            )
            index.upsert(info)
            registered[node_id] = info
        totals = shares.totals(index)
        assert totals.cores == sum(info.capacity.cores for info in registered.values())
        assert totals.memory == sum(info.capacity.memory for info in registered.values())
        gpus = sum(info.capacity.devices.get(GPU, 0) for info in registered.values())
        assert totals.devices.get(GPU, 0) == gpus
