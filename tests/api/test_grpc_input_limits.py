"""The gRPC client API holds names and hold reasons to the same rules as REST (the checks
live in ``api/requests.py``, shared by both transports), and answers a request whose bytes
are not its message INVALID_ARGUMENT, not UNKNOWN with a traceback in the server's log."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import grpc
import pytest
from support.live_api import HELLO, Stack

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


def raw_call(channel: grpc.Channel, method: str, streaming: bool = False):
    """A call of ``method`` that sends its request's bytes as given."""
    make = channel.unary_stream if streaming else channel.unary_unary
    return make(method, request_serializer=lambda data: data, response_deserializer=bytes)


def bad_utf8_string(field: int) -> bytes:
    """A message whose string field number ``field`` holds bytes that are not UTF-8."""
    return bytes([(field << 3) | 2, 2, 0xFF, 0xFE])


def test_a_request_with_a_string_that_is_not_utf8_is_invalid_argument(stack, channel, caplog):
    field = pb.StartWorkflowRequest.DESCRIPTOR.fields_by_name["name"].number
    call = raw_call(channel, "/fuzzball.v1.WorkflowService/StartWorkflow")
    with pytest.raises(grpc.RpcError) as refused:
        call(bad_utf8_string(field), metadata=auth(stack))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "String field had bad UTF-8" in refused.value.details()
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []


def test_a_malformed_request_to_a_streaming_call_is_invalid_argument(stack, channel):
    field = pb.ReadLogsRequest.DESCRIPTOR.fields_by_name["workflow_id"].number
    call = raw_call(channel, "/fuzzball.v1.WorkflowService/FollowLogs", streaming=True)
    with pytest.raises(grpc.RpcError) as refused:
        list(call(bad_utf8_string(field), metadata=auth(stack)))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
