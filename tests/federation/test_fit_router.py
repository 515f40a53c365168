"""The fit router on its own: who is eligible, in which order, and why the others are not."""

from __future__ import annotations

import pytest
import yaml
from support.federated_workflows import CPU, GPU, workflow

from fuzzball_core.api.rest_messages import read_reply
from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.drivers import ClusterOffer
from fuzzball_core.errors import InvalidArgument
from fuzzball_federation.offers import NodeShape, member_offer
from fuzzball_federation.routers.fit import FitRouter

GIB = 1024**3


def _definition(text: str) -> dict:
    return yaml.safe_load(text)


def _offer(name, cores, memory_gib, *, devices=None, annotations=None, labels=None, busy=False):
    node = NodeShape(
        name=f"{name}-1",
        cores=cores,
        memory=memory_gib * GIB,
        devices=devices or {},
        free_cores=0 if busy else cores,
        free_memory=0 if busy else memory_gib * GIB,
        annotations=annotations or {},
    )
    listed = {
        "hostName": node.name,
        "status": "READY",
        "resource": {
            "total": {
                "cpu": {"cores": cores},
                "mem": {"bytes": str(node.memory)},
                "devices": node.devices,
            },
            "free": {
                "cpu": {"cores": node.free_cores},
                "mem": {"bytes": str(node.free_memory)},
                "devices": node.devices,
            },
            "annotations": node.annotations,
        },
    }
    return member_offer(name, labels or {}, [read_reply(listed, pb.ListNodeInfo)])


def test_only_clusters_with_the_device_are_eligible():
    offers = [_offer("cpu", 64, 256), _offer("gpu", 8, 32, devices={"nvidia.com/gpu": 4})]
    assert FitRouter().route(_definition(GPU), offers) == ["gpu"]


def test_eligible_clusters_are_ordered_by_free_room():
    offers = [_offer("small", 8, 32), _offer("big", 32, 128), _offer("busy", 64, 256, busy=True)]
    assert FitRouter().route(_definition(CPU), offers) == ["big", "small", "busy"]


def test_required_annotations_must_be_on_one_node():
    text = CPU.replace("    resource:\n", "    resource:\n      annotations:\n        site: lab\n")
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


def test_preferred_labels_come_before_room():
    offers = [
        _offer("cloud", 64, 256, labels={"site": "aws"}),
        _offer("lab", 8, 32, labels={"site": "onprem"}),
    ]
    router = FitRouter({"prefer": {"site": "onprem"}})
    assert router.route(_definition(CPU), offers) == ["lab", "cloud"]


def test_cost_breaks_ties_and_weighs_in_when_asked():
    offers = [
        _offer("dear", 8, 32, labels={"cost": "5"}),
        _offer("cheap", 8, 32, labels={"cost": "1"}),
    ]
    assert FitRouter().route(_definition(CPU), offers) == ["cheap", "dear"]
    roomy_but_dear = [
        _offer("dear", 64, 256, labels={"cost": "100"}),
        _offer("cheap", 8, 32, labels={"cost": "1"}),
    ]
    assert FitRouter().route(_definition(CPU), roomy_but_dear) == ["dear", "cheap"]
    weighed = FitRouter({"cost-weight": 10})
    assert weighed.route(_definition(CPU), roomy_but_dear) == ["cheap", "dear"]


def test_multinode_job_needs_that_many_fitting_nodes():
    text = CPU.replace("    resource:\n", "    multinode:\n      nodes: 2\n    resource:\n")
    router = FitRouter()
    rejections = router.rejections(_definition(text), [_offer("one", 64, 256)])
    assert rejections == {"one": "1 node(s) can hold jobs.main, it needs 2"}


def test_bad_router_options_are_refused_naming_the_key():
    with pytest.raises(InvalidArgument, match=r"federate\.router-options\.cost-weight"):
        FitRouter({"cost-weight": "lots"})
