"""The gRPC client API holds names and hold reasons to the same rules as REST: the checks
live in ``api/requests.py``, shared by both transports."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from live_api import HELLO, Stack

from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.api.v1 import client_pb2_grpc as pb_grpc


@pytest.fixture
def channel(stack: Stack) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(stack.servers.grpc_target) as open_channel:
        yield open_channel


def auth(stack: Stack) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {stack.token}")]


def test_a_workflow_name_with_an_escape_sequence_is_invalid_argument(stack, channel):
    request = pb.StartWorkflowRequest(raw_specification=HELLO, name="a\x1b[2Jb")
    with pytest.raises(grpc.RpcError) as refused:
        pb_grpc.WorkflowServiceStub(channel).StartWorkflow(request, metadata=auth(stack))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert refused.value.details().startswith("name: character 2 (U+001B)")
    assert stack.service.list_workflows(stack.who) == []


def test_a_workflow_name_of_100000_characters_is_invalid_argument(stack, channel):
    request = pb.StartWorkflowRequest(raw_specification=HELLO, name="n" * 100_000)
    with pytest.raises(grpc.RpcError) as refused:
        pb_grpc.WorkflowServiceStub(channel).StartWorkflow(request, metadata=auth(stack))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert refused.value.details().startswith("name: 100000 characters")


def test_a_hold_reason_with_a_nul_is_invalid_argument(stack, channel):
    request = pb.AddNodeHoldRequest(node_id="node-1", effect="cordon", reason="a\x00b")
    with pytest.raises(grpc.RpcError) as refused:
        pb_grpc.NodeServiceStub(channel).AddNodeHold(request, metadata=auth(stack))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert refused.value.details().startswith("reason: character 2 (U+0000)")
