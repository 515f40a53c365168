"""Fair share's cluster totals are kept between passes and summed again only when a node was
registered, updated or removed (issue 19: each node is a class of its own, so a sum walks
every node, and an idle pass asked for it twice)."""

from support.scheduler_cluster import job, node

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
