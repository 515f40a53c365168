"""The fit router on its own, over offers built in memory: who is eligible, in which order,
at what estimated cost, and why the others are not."""

from __future__ import annotations

import pytest
import yaml
from support.federated_workflows import CPU, GPU, workflow

from fuzzball_core.api.rest_messages import read_reply
from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.drivers import ClusterOffer
from fuzzball_core.errors import InvalidArgument
from fuzzball_federation.offers import member_offer
from fuzzball_federation.routers.fit import FREE, PROVISION, QUEUED, FitRouter

GIB = 1024**3
GPU_KIND = "nvidia.com/gpu"
MODEL = "nvidia.com/gpu.model"


def _definition(text: str) -> dict:
    return yaml.safe_load(text)


def _node(
    name: str,
    cores: int,
    memory_gib: int,
    *,
    devices=None,
    annotations=None,
    busy=False,
    status="READY",
    holds=(),
) -> pb.ListNodeInfo:
    """A node as a member's ``GET /v3/nodes`` lists it, read as Federate's client does."""
    total = {"cpu": {"cores": cores}, "mem": {"bytes": str(memory_gib * GIB)}}
    free = {
        "cpu": {"cores": 0 if busy else cores},
        "mem": {"bytes": "0" if busy else total["mem"]["bytes"]},
    }
    listed = {
        "hostName": name,
        "status": status,
        "resource": {
            "total": {**total, "devices": devices or {}},
            "free": {**free, "devices": {} if busy else devices or {}},
            "annotations": annotations or {},
        },
        "holds": [{"effect": effect, "source": "admin"} for effect in holds],
    }
    return read_reply(listed, pb.ListNodeInfo)


def _definition_json(
    id, cores, memory_gib, *, devices=None, annotations=None, cost=0.0, startup=300
):
    """A provisioner definition as ``GET /v3/provisioner/definitions`` lists it."""
    return {
        "id": id,
        "backendId": "aws",
        "resource": {
            "total": {
                "cpu": {"cores": cores},
                "mem": {"bytes": str(memory_gib * GIB)},
                "devices": devices or {},
            },
            "annotations": annotations or {},
        },
        "costPerHourEstimate": cost,
        "startupTimeEstimate": str(startup),
    }


def _offer(name, cores=0, memory_gib=0, *, labels=None, definitions=(), nodes=None, **node):
    listed = nodes if nodes is not None else [_node(f"{name}-1", cores, memory_gib, **node)]
    return member_offer(name, labels or {}, listed, list(definitions))


def _timed(text: str, timeout: str) -> str:
    """``text`` with ``policy.timeout.execute: timeout`` on its job."""
    return text.replace(
        "    resource:\n",
        f"    policy:\n      timeout:\n        execute: {timeout}\n    resource:\n",
    )


def _with_annotations(text: str, annotations: dict[str, str]) -> str:
    lines = "".join(f"        {k}: {v}\n" for k, v in annotations.items())
    return text.replace("    resource:\n", f"    resource:\n      annotations:\n{lines}")


def _mounting(text: str, volume: str) -> str:
    """``text`` mounting the persistent volume ``volume`` at /data."""
    mounted = text.replace(
        "    resource:\n", "    mounts:\n      data:\n        location: /data\n    resource:\n"
    )
    return mounted + f"volumes:\n  data:\n    reference: {volume}\n"


# -- eligibility ----------------------------------------------------------------------------


def test_only_clusters_with_the_device_are_eligible():
    offers = [_offer("cpu", 64, 256), _offer("gpu", 8, 32, devices={GPU_KIND: 4})]
    assert FitRouter().route(_definition(GPU), offers) == ["gpu"]


def test_required_annotations_must_be_on_one_node():
    text = _with_annotations(CPU, {"site": "lab"})
    offers = [_offer("a", 64, 256), _offer("b", 8, 32, annotations={"site": "lab"})]
    router = FitRouter()
    assert router.route(_definition(text), offers) == ["b"]
    assert router.rejections(_definition(text), offers) == {"a": "no node has annotation site=lab"}


def test_unhealthy_cluster_is_never_chosen():
    sick = ClusterOffer(
        "sick", 100, 100 * GIB, largest_node_cores=100, largest_node_memory=100 * GIB, healthy=False
    )
    assert FitRouter().route(_definition(CPU), [sick]) == []


def test_plain_cluster_offers_are_judged_by_their_largest_node():
    offer = ClusterOffer("plain", 4, 8 * GIB, largest_node_cores=4, largest_node_memory=8 * GIB)
    router = FitRouter()
    assert router.route(_definition(workflow(4, "8GiB")), [offer]) == ["plain"]
    assert router.route(_definition(workflow(8, "8GiB")), [offer]) == []


def test_multinode_job_needs_that_many_fitting_nodes():
    text = CPU.replace("    resource:\n", "    multinode:\n      nodes: 2\n    resource:\n")
    router = FitRouter()
    rejections = router.rejections(_definition(text), [_offer("one", 64, 256)])
    assert rejections == {"one": "1 node(s) can hold jobs.main, it needs 2"}


def test_held_nodes_never_count():
    held = _offer("held", 64, 256, holds=["cordon"])
    assert FitRouter().rejections(_definition(CPU), [held]) == {"held": "has no ready node"}


def test_offline_nodes_never_count():
    offline = _offer("offline", 64, 256, status="OFFLINE")
    assert FitRouter().route(_definition(CPU), [offline]) == []


def test_a_held_node_is_left_out_of_the_members_free_capacity():
    offer = _offer(
        "mixed",
        nodes=[_node("a", 8, 32), _node("b", 64, 256, holds=["evict"])],
    )
    assert (offer.free_cores, offer.ready_nodes) == (8, 1)


def test_nodes_of_one_shape_are_one_entry_with_their_count():
    nodes = [_node(f"n{i}", 32, 128) for i in range(100)] + [_node("busy", 32, 128, busy=True)]
    offer = member_offer("big", {}, nodes)
    assert sorted(shape.count for shape in offer.nodes) == [1, 100]
    assert offer.ready_nodes == 101
    assert offer.free_cores == 100 * 32


# -- provisionable capacity -----------------------------------------------------------------


def test_provisionable_capacity_makes_a_member_eligible():
    cloud = _offer(
        "cloud",
        nodes=[],
        definitions=[_definition_json("gpu", 8, 64, devices={GPU_KIND: 1}, cost=3)],
    )
    decision = FitRouter().decide(_definition(GPU), [cloud])
    assert decision.chosen == ("cloud",)
    plan = decision.estimates["cloud"].jobs[0]
    assert (plan.how, plan.definition, plan.start) == (PROVISION, "gpu", 300)


def test_a_member_with_neither_nodes_nor_a_fitting_definition_is_rejected_naming_the_shortfall():
    cloud = _offer("cloud", nodes=[], definitions=[_definition_json("small", 2, 4)])
    assert FitRouter().rejections(_definition(GPU), [cloud]) == {"cloud": f"no node has {GPU_KIND}"}


def test_provisionable_capacity_costs_more_than_free_capacity():
    onprem = _offer("onprem", 8, 32)
    cloud = _offer("cloud", nodes=[], definitions=[_definition_json("m5", 16, 64, cost=0.5)])
    decision = FitRouter().decide(_definition(CPU), [cloud, onprem])
    assert decision.chosen == ("onprem", "cloud")
    assert decision.estimates["onprem"].cost == 0
    assert decision.estimates["cloud"].cost == pytest.approx(0.5)


def test_the_cheapest_fitting_definition_is_planned():
    cloud = _offer(
        "cloud",
        nodes=[],
        definitions=[
            _definition_json("dear", 16, 64, cost=4),
            _definition_json("cheap", 8, 32, cost=1),
        ],
    )
    plan = FitRouter().decide(_definition(CPU), [cloud]).estimates["cloud"].jobs[0]
    assert (plan.definition, plan.cost) == ("cheap", 1)


def test_free_nodes_are_planned_before_a_definition_of_the_same_member():
    member = _offer("both", 8, 32, definitions=[_definition_json("extra", 8, 32, cost=2)])
    plan = FitRouter().decide(_definition(CPU), [member]).estimates["both"].jobs[0]
    assert plan.how == FREE


# -- cost -----------------------------------------------------------------------------------


def test_a_job_is_priced_for_its_declared_timeout():
    cloud = _offer("cloud", nodes=[], definitions=[_definition_json("m5", 16, 64, cost=3)])
    estimate = FitRouter().decide(_definition(_timed(CPU, "2h")), [cloud]).estimates["cloud"]
    assert estimate.cost == pytest.approx(6)
    assert estimate.notes == ()


def test_a_job_without_a_timeout_is_priced_for_the_default_hours_and_the_estimate_says_so():
    cloud = _offer("cloud", nodes=[], definitions=[_definition_json("m5", 16, 64, cost=3)])
    estimate = FitRouter({"default-hours": 4}).decide(_definition(CPU), [cloud]).estimates["cloud"]
    assert estimate.cost == pytest.approx(12)
    assert estimate.notes == ("jobs.main declares no policy.timeout.execute: priced for 4 h",)


def test_free_capacity_costs_the_members_price_per_hour():
    dear = _offer("dear", 8, 32, labels={"price-per-hour": "2"})
    cheap = _offer("cheap", 8, 32, labels={"price-per-hour": "0.5"})
    decision = FitRouter().decide(_definition(_timed(CPU, "30m")), [dear, cheap])
    assert decision.chosen == ("cheap", "dear")
    assert decision.estimates["dear"].cost == pytest.approx(1)


def test_at_equal_cost_the_roomier_member_comes_first_and_busy_members_last():
    offers = [_offer("small", 8, 32), _offer("big", 32, 128), _offer("busy", 64, 256, busy=True)]
    decision = FitRouter().decide(_definition(CPU), offers)
    assert decision.chosen == ("big", "small", "busy")
    assert decision.estimates["busy"].jobs[0].how == QUEUED
    assert decision.estimates["busy"].start_delay is None


def test_a_quicker_definition_wins_at_equal_cost():
    slow = _offer("slow", nodes=[], definitions=[_definition_json("a", 8, 32, cost=1, startup=900)])
    quick = _offer(
        "quick", nodes=[], definitions=[_definition_json("a", 8, 32, cost=1, startup=60)]
    )
    assert FitRouter().route(_definition(CPU), [slow, quick]) == ["quick", "slow"]


def test_a_price_label_that_is_not_a_number_makes_the_member_unroutable_naming_it():
    offer = _offer("odd", 8, 32, labels={"egress-price-per-gib": "cheap"})
    reasons = FitRouter().rejections(_definition(CPU), [offer])
    assert reasons == {"odd": "label egress-price-per-gib: 'cheap' is not a number"}


def test_preferred_labels_come_before_cost():
    offers = [
        _offer("cloud", 64, 256, labels={"site": "aws"}),
        _offer("lab", 8, 32, labels={"site": "onprem", "price-per-hour": "9"}),
    ]
    router = FitRouter({"prefer": {"site": "onprem"}})
    assert router.route(_definition(CPU), offers) == ["lab", "cloud"]


# -- accelerator models ---------------------------------------------------------------------


def test_a_gpu_model_is_matched_by_the_nodes_model_annotation():
    a100 = _offer("a100", 8, 32, devices={GPU_KIND: 4}, annotations={MODEL: "A100"})
    h100 = _offer("h100", 8, 32, devices={GPU_KIND: 4}, annotations={MODEL: "H100"})
    text = _with_annotations(GPU, {MODEL: "H100"})
    router = FitRouter()
    assert router.route(_definition(text), [a100, h100]) == ["h100"]
    assert router.rejections(_definition(text), [a100, h100]) == {
        "a100": f"no node has a {GPU_KIND} of model H100"
    }


def test_a_definitions_gpu_model_counts_as_provisionable():
    cloud = _offer(
        "cloud",
        nodes=[],
        definitions=[
            _definition_json("p5", 8, 64, devices={GPU_KIND: 8}, annotations={MODEL: "H100"})
        ],
    )
    text = _with_annotations(GPU, {MODEL: "H100"})
    assert FitRouter().route(_definition(text), [cloud]) == ["cloud"]


# -- data -----------------------------------------------------------------------------------


def test_the_member_holding_a_persistent_volume_comes_before_cheaper_and_roomier_ones():
    text = _mounting(CPU, "volume://user/persistent/results")
    roomy = _offer("roomy", 64, 256)
    holder = _offer("holder", 8, 32, labels={"price-per-hour": "1"})
    locations = {"volume://user/persistent/results": {"holder": 5 * GIB}}
    decision = FitRouter().decide(_definition(text), [roomy, holder], volume_locations=locations)
    assert decision.chosen == ("holder", "roomy")
    assert not decision.estimates["holder"].moves_data


def test_data_movement_is_priced_at_the_holders_egress_price_and_rate():
    text = _mounting(GPU, "volume://user/persistent/results")
    holder = _offer(
        "holder", 8, 32, labels={"egress-price-per-gib": "0.09", "egress-gib-per-second": "0.5"}
    )
    gpu = _offer("gpu", 8, 32, devices={GPU_KIND: 1})
    locations = {"volume://user/persistent/results": {"holder": 10 * GIB}}
    decision = FitRouter().decide(_definition(text), [holder, gpu], volume_locations=locations)
    assert decision.chosen == ("gpu",)
    estimate = decision.estimates["gpu"]
    assert estimate.data_cost == pytest.approx(0.9)
    assert estimate.start_delay == pytest.approx(20)
    assert "volume data lives on holder (10 GiB to move)" in estimate.notes


def test_a_volume_no_member_holds_yet_constrains_nothing():
    text = _mounting(CPU, "volume://user/persistent/new")
    offers = [_offer("a", 8, 32), _offer("b", 64, 256)]
    assert FitRouter().route(_definition(text), offers) == ["b", "a"]


# -- the decision ---------------------------------------------------------------------------


def test_the_decision_names_the_chosen_member_its_estimate_and_each_rejection():
    offers = [_offer("cpu", 64, 256), _offer("gpu", 8, 32, devices={GPU_KIND: 4})]
    decision = FitRouter().decide(_definition(_timed(GPU, "1h")), offers)
    summary = decision.summary()
    assert summary.startswith("routed to cluster gpu: est. $0.00, starts in ~0 s")
    assert summary.endswith(f"rejected: cpu (no node has {GPU_KIND})")
    data = decision.as_data()
    assert data["cluster"] == "gpu"
    assert data["rejected"] == {"cpu": f"no node has {GPU_KIND}"}
    assert data["candidates"][0]["jobs"]["jobs.main"]["capacity"] == FREE


# -- options --------------------------------------------------------------------------------


@pytest.mark.parametrize("option", ["cost-label", "cost-weight"])
def test_retired_cost_options_are_refused_naming_them(option):
    with pytest.raises(
        InvalidArgument, match=rf"federate\.router-options\.{option}: no longer read"
    ):
        FitRouter({option: 1})


def test_a_default_hours_that_is_not_a_positive_number_is_refused_naming_it():
    with pytest.raises(InvalidArgument, match=r"federate\.router-options\.default-hours"):
        FitRouter({"default-hours": "lots"})


def test_an_unknown_router_option_is_refused_naming_it():
    with pytest.raises(InvalidArgument, match=r"federate\.router-options\.prefered: unknown"):
        FitRouter({"prefered": {}})
