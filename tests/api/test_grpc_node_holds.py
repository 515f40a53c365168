"""Node holds, node removal and workflow explanations over the live gRPC client API."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from support.live_api import Stack
from test_grpc_client_api import auth
from test_rest_node_holds import wait_for_reason

from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.api.v1 import client_pb2_grpc as pb_grpc
from fuzzball_core.service.views import FINISHED


@pytest.fixture
def nodes(stack: Stack) -> Iterator[pb_grpc.NodeServiceStub]:
    with grpc.insecure_channel(stack.servers.grpc_target) as channel:
        yield pb_grpc.NodeServiceStub(channel)


@pytest.fixture
def workflows(stack: Stack) -> Iterator[pb_grpc.WorkflowServiceStub]:
    with grpc.insecure_channel(stack.servers.grpc_target) as channel:
        yield pb_grpc.WorkflowServiceStub(channel)


@pytest.fixture
def admin(stack: Stack) -> list[tuple[str, str]]:
    _, token = stack.service.create_account("admin", admin=True)
    return auth(token)


def cordon(nodes: pb_grpc.NodeServiceStub, metadata, reason: str = "maintenance") -> pb.NodeHold:
    request = pb.AddNodeHoldRequest(node_id="node-1", effect="cordon", reason=reason)
    return nodes.AddNodeHold(request, metadata=metadata)


@pytest.mark.parametrize(
    ("rpc", "request_message"),
    [
        ("ListNodeHolds", pb.NodeIdRequest(node_id="node-1")),
        ("AddNodeHold", pb.AddNodeHoldRequest(node_id="node-1", effect="cordon")),
        ("ReleaseNodeHold", pb.ReleaseNodeHoldRequest(node_id="node-1", hold_id=1)),
        ("UncordonNode", pb.NodeIdRequest(node_id="node-1")),
        ("RemoveNode", pb.NodeIdRequest(node_id="node-1")),
    ],
)
def test_hold_calls_without_a_token_are_unauthenticated(nodes, rpc, request_message):
    with pytest.raises(grpc.RpcError) as error:
        getattr(nodes, rpc)(request_message)
    assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_an_admin_places_a_hold_and_the_node_carries_it(nodes, admin):
    hold = cordon(nodes, admin)
    assert (hold.effect, hold.source, hold.reason, hold.placed_by) == (
        "cordon",
        "admin",
        "maintenance",
        "admin",
    )
    assert hold.id > 0 and hold.place_time.seconds > 0
    assert list(nodes.GetNode(pb.GetNodeRequest(id="node-1"), metadata=admin).holds) == [hold]
    listed = nodes.ListNodeHolds(pb.NodeIdRequest(node_id="node-1"), metadata=admin)
    assert list(listed.holds) == [hold]


def test_a_non_admin_placing_a_hold_is_permission_denied(stack, nodes):
    with pytest.raises(grpc.RpcError) as error:
        cordon(nodes, auth(stack.token))
    assert error.value.code() == grpc.StatusCode.PERMISSION_DENIED


def test_an_unknown_effect_is_invalid_naming_the_field(nodes, admin):
    request = pb.AddNodeHoldRequest(node_id="node-1", effect="drain")
    with pytest.raises(grpc.RpcError) as error:
        nodes.AddNodeHold(request, metadata=admin)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.value.details().startswith("effect:")


def test_a_released_hold_is_gone(nodes, admin):
    hold = cordon(nodes, admin)
    nodes.ReleaseNodeHold(
        pb.ReleaseNodeHoldRequest(node_id="node-1", hold_id=hold.id), metadata=admin
    )
    assert not nodes.ListNodeHolds(pb.NodeIdRequest(node_id="node-1"), metadata=admin).holds


def test_uncordon_keeps_a_monitoring_hold(stack, nodes, admin):
    _, monitoring = stack.service.create_account("monitoring", kind="monitoring")
    cordon(nodes, admin)
    kept = cordon(nodes, auth(monitoring), "ECC errors")
    reply = nodes.UncordonNode(pb.NodeIdRequest(node_id="node-1"), metadata=admin)
    assert reply.released == 1
    assert list(reply.holds) == [kept]


def test_removing_a_node_that_is_up_is_failed_precondition(nodes, admin):
    with pytest.raises(grpc.RpcError) as error:
        nodes.RemoveNode(pb.NodeIdRequest(node_id="node-1"), metadata=admin)
    assert error.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "still up" in error.value.details()


def test_explain_workflow_names_the_hold_holding_a_job_back(stack, nodes, workflows, admin):
    cordon(nodes, admin)
    workflow_id = stack.start()
    wait_for_reason(stack, workflow_id)
    request = pb.ExplainWorkflowRequest(workflow_id=workflow_id)
    (stage,) = workflows.ExplainWorkflow(request, metadata=auth(stack.token)).stages
    assert stage.stage_name == "jobs.hello"
    assert stage.kind == pb.STAGE_KIND_JOB
    assert stage.status == pb.STAGE_STATUS_UNSPECIFIED
    assert stage.reason == "INSUFFICIENT_RESOURCES"
    assert "held (cordon by admin)" in stage.message
    assert not stage.HasField("estimated_start_time")


def test_explain_workflow_includes_finished_stages_on_request(stack, workflows):
    workflow_id = stack.start()
    stack.service.set_stage(workflow_id, "jobs.hello", FINISHED)
    metadata = auth(stack.token)
    waiting = workflows.ExplainWorkflow(
        pb.ExplainWorkflowRequest(workflow_id=workflow_id), metadata=metadata
    )
    assert not waiting.stages
    every = workflows.ExplainWorkflow(
        pb.ExplainWorkflowRequest(workflow_id=workflow_id, include_finished=True),
        metadata=metadata,
    )
    assert [(s.stage_name, s.reason) for s in every.stages] == [("jobs.hello", "FINISHED")]
