"""Routing through the real Federate service over real members: held nodes, clusterId,
the decision as an event and in ``workflow why``, and capacity read from the cache."""

from __future__ import annotations

import time

import pytest
from google.protobuf import json_format
from support.federated_workflows import CPU, GPU
from support.sql_stack import ADMIN

from fuzzball_core.errors import FuzzballError
from fuzzball_core.vocabulary import EventKind

GPU_KIND = "nvidia.com/gpu"


def _start(federation, text: str, **fields) -> str:
    """Start ``text`` through Federate's REST API with extra StartWorkflowRequest fields."""
    body = {"rawSpecification": text, "name": "routed", **fields}
    return federation.client().call_json("POST", "/workflows", body=body)["id"]


def test_a_held_node_does_not_count_as_capacity(federation):
    onprem = federation.members["onprem"]
    gpu_node = onprem.stack.list_nodes(ADMIN)[0]
    onprem.stack.add_hold(ADMIN, gpu_node.id, "cordon", "maintenance")
    with pytest.raises(FuzzballError) as refused:
        federation.client().start_workflow(GPU)
    assert "cluster onprem: has no ready node" in refused.value.message


def test_cluster_id_pins_the_member(federation):
    workflow_id = _start(federation, CPU, clusterId="onprem")  # aws is roomier
    assert federation.service.cluster_of(federation.who, workflow_id) == "onprem"


def test_cluster_id_may_be_the_members_id(federation):
    member = federation.service.members.get("onprem")
    workflow_id = _start(federation, CPU, clusterId=member.id)
    assert federation.service.cluster_of(federation.who, workflow_id) == "onprem"


def test_cluster_id_of_no_member_is_refused_naming_it(federation):
    with pytest.raises(FuzzballError) as refused:
        _start(federation, CPU, clusterId="mars")
    assert refused.value.http_status == 400
    assert "clusterId: 'mars' is not a member cluster of this federation" in refused.value.message


def test_cluster_id_of_a_member_that_cannot_run_it_is_refused_with_the_reason(federation):
    with pytest.raises(FuzzballError) as refused:
        _start(federation, GPU, clusterId="aws")
    assert refused.value.http_status == 400
    assert (
        f"clusterId aws: cluster aws cannot run this workflow: no node has {GPU_KIND}"
        in refused.value.message
    )
    aws = federation.members["aws"]
    assert aws.stack.list_workflows(aws.stack.authenticate(aws.token)) == []


def test_the_decision_is_the_first_event_of_the_workflow(federation):
    workflow_id = federation.client().start_workflow(GPU, name="gpu")
    events = federation.client().list_events(workflow_id)
    routed = events[0]
    assert routed.kind == EventKind.WORKFLOW_ROUTED
    assert routed.message.startswith("routed to cluster onprem: est. $0.00")
    assert f"rejected: aws (no node has {GPU_KIND})" in routed.message
    data = json_format.MessageToDict(routed.data)
    assert data["cluster"] == "onprem"
    assert data["rejected"] == {"aws": f"no node has {GPU_KIND}"}
    assert data["candidates"][0]["jobs"]["jobs.main"]["capacity"] == "free"


def test_workflow_why_starts_with_the_routing_decision(federation):
    workflow_id = federation.client().start_workflow(CPU, name="cpu")
    explained = federation.client().explain_workflow(workflow_id, include_finished=True)
    first = explained[0]
    assert (first.stage_name, first.reason) == ("federate", "ROUTED")
    assert first.message.startswith("routed to cluster aws: ")
    assert "also eligible: onprem" in first.message


def test_decisions_read_cached_capacity_instead_of_asking_members(federation):
    asked = {name: 0 for name in federation.members}
    for name, member in federation.members.items():
        service = member.stack.service
        listing = service.list_nodes

        def counted(who, name=name, listing=listing):
            asked[name] += 1
            return listing(who)

        service.list_nodes = counted
    # no background refresh within this test: only the first decision may ask
    federation.service.capacity.interval = federation.service.capacity.max_age = 3600
    for _ in range(5):
        federation.client().validate_workflow(CPU)
    assert asked == {"onprem": 1, "aws": 1}


def test_the_background_refresher_brings_a_new_hold_into_later_decisions(federation):
    federation.client().validate_workflow(GPU)  # cached: onprem's GPU node is free
    capacity = federation.service.capacity
    capacity.interval, capacity.max_age = 0.05, 3600  # decisions never ask themselves
    onprem = federation.members["onprem"]
    gpu_node = onprem.stack.list_nodes(ADMIN)[0]
    onprem.stack.add_hold(ADMIN, gpu_node.id, "cordon", "maintenance")
    capacity.refresh_soon()
    deadline = time.monotonic() + 30
    while next(o for o in capacity.offers() if o.name == "onprem").ready_nodes:
        assert time.monotonic() < deadline, "the refresher never asked onprem again"
        time.sleep(0.05)
    with pytest.raises(FuzzballError) as refused:
        federation.client().start_workflow(GPU)
    assert "cluster onprem: has no ready node" in refused.value.message
