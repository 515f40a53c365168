"""Multinode jobs and NVLink domains: a job that prefers (or requires) one domain is placed
inside one when a domain has enough free nodes, else spreads saying why (or waits, saying
why); nodes report their domain as the ``nvidia.com/nvlink-domain`` annotation."""

from dataclasses import replace

import pytest
from support.scheduler_cluster import cluster, job, node, placed_on

from fuzzball_core.errors import InvalidArgument
from fuzzball_core.scheduling import NVLINK_DOMAIN, DomainPolicy, ReasonCode
from fuzzball_plugins.schedulers import domains


def gpu_node(node_id: str, domain: str):
    """A 16-core node of NVLink domain ``domain``."""
    return node(node_id, cores=16, annotations={NVLINK_DOMAIN: domain})


def three_domains():
    """Domain c: four idle nodes. Domains a and b: four nodes each, two of them full and two
    half used, so best fit alone (which tries a and b first) takes the half-used ones of a
    and b."""
    nodes = [gpu_node(f"{domain}-n{i}", domain) for domain in ("a", "b", "c") for i in range(4)]
    scheduler = cluster(*nodes)
    for domain in ("a", "b"):
        for i, cores in enumerate((16, 16, 8, 8)):
            scheduler.allocate(job(f"busy-{domain}-{i}", cores=cores), [f"{domain}-n{i}"])
    return scheduler


def four_node_job(policy: DomainPolicy | None):
    return replace(job("train", cores=8, nodes=4), domain=policy)


def test_without_a_domain_policy_best_fit_takes_the_half_used_nodes_of_two_domains():
    result = three_domains().schedule([four_node_job(None)], now=0)

    assert sorted(placed_on(result, "train")) == ["a-n2", "a-n3", "b-n2", "b-n3"]


def test_a_four_node_job_lands_inside_the_one_domain_with_four_free_nodes():
    result = three_domains().schedule([four_node_job(DomainPolicy.PREFER)], now=0)

    assert sorted(placed_on(result, "train")) == ["c-n0", "c-n1", "c-n2", "c-n3"]
    assert result.placements[0].note == ""


def test_a_job_requiring_one_domain_lands_inside_it_too():
    result = three_domains().schedule([four_node_job(DomainPolicy.REQUIRE)], now=0)

    assert sorted(placed_on(result, "train")) == ["c-n0", "c-n1", "c-n2", "c-n3"]


def test_the_tightest_domain_that_fits_is_taken():
    nodes = [gpu_node(f"big-{i}", "big") for i in range(8)]
    nodes += [gpu_node(f"small-{i}", "small") for i in range(2)]
    scheduler = cluster(*nodes)

    result = scheduler.schedule(
        [replace(job("pair", cores=8, nodes=2), domain=DomainPolicy.PREFER)], now=0
    )

    assert sorted(placed_on(result, "pair")) == ["small-0", "small-1"]


def test_with_no_domain_big_enough_a_preferring_job_spreads_and_says_why():
    scheduler = three_domains()
    scheduler.allocate(job("takes-c", cores=16), ["c-n0"])
    scheduler.allocate(job("takes-c-too", cores=16), ["c-n1"])

    result = scheduler.schedule([four_node_job(DomainPolicy.PREFER)], now=0)

    chosen = placed_on(result, "train")
    assert chosen is not None and len(chosen) == 4
    (placement,) = result.placements
    assert placement.note == (
        "spread over 2 NVLink domains (nvidia.com/nvlink-domain): no NVLink domain has 4"
        " nodes with room (the most: 2 in c; 6 in all)"
    )


def test_with_no_domain_big_enough_a_requiring_job_waits_and_says_why():
    scheduler = three_domains()
    scheduler.allocate(job("takes-c", cores=16), ["c-n0"])

    result = scheduler.schedule([four_node_job(DomainPolicy.REQUIRE)], now=0)

    assert placed_on(result, "train") is None
    diagnosis = result.diagnoses["train"]
    assert diagnosis.reason is ReasonCode.INSUFFICIENT_RESOURCES
    assert diagnosis.message.endswith(
        "no NVLink domain has 4 nodes with room (the most: 3 in c; 7 in all)"
    )


def test_a_job_requiring_a_domain_larger_than_any_is_infeasible():
    scheduler = three_domains()

    diagnosis = scheduler.check_feasible(
        replace(job("huge", cores=8, nodes=5), domain=DomainPolicy.REQUIRE)
    )

    assert diagnosis is not None and diagnosis.reason is ReasonCode.INFEASIBLE
    assert diagnosis.message == (
        "job needs 5 nodes in one NVLink domain (nvidia.com/nvlink-domain); the largest"
        " domain, c, has 4 that could hold it"
    )


def test_a_job_preferring_a_domain_larger_than_any_is_feasible():
    scheduler = three_domains()

    assert (
        scheduler.check_feasible(replace(job("huge", cores=8, nodes=5), domain=DomainPolicy.PREFER))
        is None
    )


def test_nodes_without_a_domain_are_used_as_before():
    scheduler = cluster(node("a"), node("b"), node("c"))

    result = scheduler.schedule(
        [replace(job("pair", cores=8, nodes=2), domain=DomainPolicy.PREFER)], now=0
    )

    assert placed_on(result, "pair") is not None
    assert result.placements[0].note == ""


def test_an_unknown_domain_policy_is_refused_by_name():
    with pytest.raises(InvalidArgument, match="domain must be one of prefer, require"):
        replace(job("j", nodes=2), domain="always")


def test_a_shapes_domain_verdict_is_worked_out_once_while_no_node_changes(monkeypatch):
    scheduler = three_domains()
    asked = []
    walk = domains.infeasible

    def counted(index, shape):
        asked.append(shape)
        return walk(index, shape)

    monkeypatch.setattr(domains, "infeasible", counted)
    huge = replace(job("huge", cores=8, nodes=5), domain=DomainPolicy.REQUIRE)

    verdicts = [scheduler.check_feasible(replace(huge, id=f"huge-{i}")) for i in range(3)]

    assert len(asked) == 1
    assert all(v is not None and v.reason is ReasonCode.INFEASIBLE for v in verdicts)


def test_a_node_registered_in_a_domain_renews_its_verdict():
    scheduler = three_domains()
    huge = replace(job("huge", cores=8, nodes=5), domain=DomainPolicy.REQUIRE)
    assert scheduler.check_feasible(huge) is not None

    scheduler.upsert_node(gpu_node("c-n4", "c"))

    assert scheduler.check_feasible(replace(huge, id="huge-2")) is None
