"""The node list's body is the whole ``ListNodesResponse``'s REST JSON, whatever it kept."""

import dataclasses
import json

import pytest

from fuzzball_core.api import proto_messages as msg
from fuzzball_core.api.node_listing import NodeListBody, node_json
from fuzzball_core.api.rest_messages import to_json
from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.service.views import HoldView, NodeView


def node(number: int, **changes: object) -> NodeView:
    view = NodeView(
        id=f"id-{number}",
        name=f"node-{number}",
        status="READY",
        cores=32,
        memory=64 << 30,
        devices={"nvidia.com/gpu": 2},
        annotations={"zone": "a"},
        used_cores=4,
        used_memory=1 << 30,
        used_devices={"nvidia.com/gpu": 1},
        last_seen=1000.0,
        stages=("wf/one",),
    )
    return dataclasses.replace(view, **changes)


def uncached(nodes: list[NodeView]) -> object:
    return to_json(pb.ListNodesResponse(nodes=[msg.node_list_message(n) for n in nodes]))


def test_body_is_the_messages_rest_json():
    nodes = [node(1), node(2, holds=(HoldView(1, "id-2", "cordon", "admin", "why", "me", 5.0),))]
    assert json.loads(NodeListBody().body(nodes)) == uncached(nodes)


def test_empty_list_has_an_empty_nodes_array():
    assert json.loads(NodeListBody().body([])) == uncached([]) == {"nodes": []}


def test_a_node_changed_since_the_last_list_is_listed_as_it_is_now():
    listing = NodeListBody()
    listing.body([node(1), node(2)])
    now = [node(1, used_cores=30, stages=("wf/a", "wf/b")), node(2, status="OFFLINE")]
    assert json.loads(listing.body(now)) == uncached(now)


def test_a_node_seen_again_lists_its_kept_text():
    listing = NodeListBody()
    first = listing.body([node(1)])
    assert listing.body([node(1, last_seen=2000.0)]) == first


def test_a_removed_node_is_not_listed_and_is_listed_anew_when_back():
    listing = NodeListBody()
    listing.body([node(1), node(2)])
    assert json.loads(listing.body([node(2)])) == uncached([node(2)])
    assert json.loads(listing.body([node(1, cores=8), node(2)])) == uncached(
        [node(1, cores=8), node(2)]
    )


HOLD = HoldView(7, "id-1", "cordon", "admin", "repair", "ops", 1_700_000_000.25)


@pytest.mark.parametrize(
    "view",
    [
        node(1),
        node(1, holds=(HOLD, dataclasses.replace(HOLD, id=8, reason="", placed_by=None))),
        node(1, devices={}, used_devices={}, annotations={}, stages=()),
        node(1, used_cores=40, used_memory=128 << 30, used_devices={"nvidia.com/gpu": 3}),
        node(1, memory=0, cores=0, status="DEPROVISIONED", annotations={"zone": 'ü"/\\'}),
        node(1, devices={"a": 1, "b": 2}, used_devices={"b": 2, "c": 1}),
    ],
    ids=["plain", "holds", "empty", "over-committed", "odd-text", "device-kinds"],
)
def test_a_nodes_text_is_its_list_messages_rest_json(view):
    assert json.loads(node_json(view)) == to_json(msg.node_list_message(view))


def test_a_node_running_other_stages_as_many_as_before_lists_its_kept_text():
    listing = NodeListBody()
    first = listing.body([node(1, stages=("wf/a",))])
    assert listing.body([node(1, stages=("wf/b",))]) == first


def test_a_body_is_its_nodes_texts_whatever_was_kept():
    listing = NodeListBody()
    listing.body([node(1), node(2)])
    now = [node(1, used_cores=5, used_devices={}), node(2, used_memory=2 << 30), node(3)]
    assert listing.body(now) == '{"nodes": [' + ", ".join(node_json(n) for n in now) + "]}"


def test_nodes_with_the_same_free_cores_list_their_own_free_memory_and_devices():
    nodes = [node(1), node(2, used_memory=3 << 30), node(3, used_devices={"nvidia.com/gpu": 2})]
    assert json.loads(NodeListBody().body(nodes)) == uncached(nodes)


def test_a_view_listed_again_after_another_of_its_node_lists_its_own_text():
    listing = NodeListBody()
    before, changed = node(1), node(1, used_cores=30, status="OFFLINE")
    listing.body([before])
    listing.body([changed])
    assert listing.body([before]) == '{"nodes": [' + node_json(before) + "]}"


def test_nodes_of_one_list_with_other_totals_and_annotations_list_their_own():
    nodes = [node(1), node(2, cores=8, annotations={"zone": "b"}), node(3, devices={}), node(4)]
    assert json.loads(NodeListBody().body(nodes)) == uncached(nodes)


def test_the_very_views_of_the_last_body_are_listed_with_its_text():
    nodes = [node(1), node(2)]
    body = NodeListBody()
    first = body.body(nodes)
    assert body.body(list(nodes)) is first


def test_a_list_of_the_last_bodys_views_but_one_or_in_another_order_is_made_anew():
    nodes = [node(1), node(2)]
    body = NodeListBody()
    body.body(nodes)
    for changed in ([nodes[0], node(2, used_cores=8)], [nodes[1], nodes[0]], nodes[:1]):
        assert body.body(changed) == NodeListBody().body(changed)
