"""The gRPC client API (fuzzball.v1) over a live grpc.aio server: auth, errors, messages."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import grpc
import pytest
from google.protobuf import struct_pb2
from support.live_api import HELLO, TASKS, Stack

from fuzzball_core import FUZZBALL_API_RELEASE
from fuzzball_core.api.grpc_client import peer_address
from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.api.v1 import client_pb2_grpc as pb_grpc
from fuzzball_core.service.views import FAILED, FINISHED


@pytest.fixture
def channel(stack: Stack) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(stack.servers.grpc_target) as open_channel:
        yield open_channel


def auth(token: str) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {token}")]


def workflows(channel: grpc.Channel) -> pb_grpc.WorkflowServiceStub:
    return pb_grpc.WorkflowServiceStub(channel)


def test_version_needs_a_token(stack, channel):
    versions = pb_grpc.VersionServiceStub(channel)
    with pytest.raises(grpc.RpcError) as missing:
        versions.GetVersion(pb.GetVersionRequest())
    assert missing.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "authorization: Bearer" in missing.value.details()
    reply = versions.GetVersion(pb.GetVersionRequest(), metadata=auth(stack.token))
    assert reply.version == FUZZBALL_API_RELEASE
    assert reply.server_version == stack.service.version()


@pytest.mark.parametrize(
    ("rpc", "request_message"),
    [
        ("ListWorkflows", pb.ListWorkflowsRequest()),
        ("GetWorkflow", pb.WorkflowIdRequest(id="x")),
        ("StartWorkflow", pb.StartWorkflowRequest(raw_specification=HELLO)),
        ("ReadLogs", pb.ReadLogsRequest(workflow_id="x")),
    ],
)
def test_a_wrong_token_is_unauthenticated(stack, channel, rpc, request_message):
    with pytest.raises(grpc.RpcError) as error:
        getattr(workflows(channel), rpc)(request_message, metadata=auth("wrong"))
    assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_start_get_and_list_a_workflow(stack, channel):
    api = workflows(channel)
    started = api.StartWorkflow(
        pb.StartWorkflowRequest(raw_specification=HELLO, name="hi"), metadata=auth(stack.token)
    )
    workflow = api.GetWorkflow(pb.WorkflowIdRequest(id=started.id), metadata=auth(stack.token))
    assert workflow.name == "hi"
    assert workflow.raw_specification == HELLO
    assert workflow.status == pb.STAGE_STATUS_STARTED
    assert workflow.create_time.seconds > 0
    job = next(s for s in workflow.jobs if s.name == "jobs.hello")
    assert (job.kind, job.status) == (pb.STAGE_KIND_JOB, pb.STAGE_STATUS_UNSPECIFIED)
    listed = api.ListWorkflows(pb.ListWorkflowsRequest(), metadata=auth(stack.token))
    assert [w.id for w in listed.workflows] == [started.id]


def test_start_from_a_struct_definition_keeps_whole_numbers(stack, channel):
    definition = struct_pb2.Struct()
    definition.update(
        {
            "version": "v1",
            "jobs": {
                "one": {
                    "image": {"uri": "docker://alpine"},
                    "command": ["true"],
                    "resource": {"cpu": {"cores": 2}, "memory": {"size": "1GB"}},
                }
            },
        }
    )
    started = workflows(channel).StartWorkflow(
        pb.StartWorkflowRequest(definition=definition), metadata=auth(stack.token)
    )
    stored = stack.service.get_workflow(stack.who, started.id)
    assert "cores: 2\n" in stored.raw_specification


def test_an_invalid_workflow_is_invalid_argument_with_its_field_path(stack, channel):
    broken = HELLO.replace("cores: 1", "cores: many")
    with pytest.raises(grpc.RpcError) as error:
        workflows(channel).StartWorkflow(
            pb.StartWorkflowRequest(raw_specification=broken), metadata=auth(stack.token)
        )
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "jobs.hello" in error.value.details()


def test_a_start_without_a_source_is_invalid_argument(stack, channel):
    with pytest.raises(grpc.RpcError) as error:
        workflows(channel).StartWorkflow(pb.StartWorkflowRequest(), metadata=auth(stack.token))
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "raw_specification or definition" in error.value.details()


def test_validate_returns_warnings(stack, channel):
    reply = workflows(channel).ValidateWorkflow(
        pb.ValidateWorkflowRequest(raw_specification=HELLO), metadata=auth(stack.token)
    )
    assert list(reply.warnings) == []


def test_another_accounts_workflow_is_not_found(stack, channel):
    workflow_id = stack.start()
    with pytest.raises(grpc.RpcError) as error:
        workflows(channel).GetWorkflow(
            pb.WorkflowIdRequest(id=workflow_id), metadata=auth(stack.other_token)
        )
    assert error.value.code() == grpc.StatusCode.NOT_FOUND


def test_status_and_stop(stack, channel):
    api = workflows(channel)
    workflow_id = stack.start()
    api.StopWorkflow(pb.WorkflowIdRequest(id=workflow_id), metadata=auth(stack.token))
    status = api.GetWorkflowStatus(pb.WorkflowIdRequest(id=workflow_id), metadata=auth(stack.token))
    assert status.workflow_status == pb.STAGE_STATUS_CANCELED
    assert all(s.status == pb.STAGE_STATUS_CANCELED for s in status.status.stages)
    with pytest.raises(grpc.RpcError) as error:
        api.StopWorkflow(pb.WorkflowIdRequest(id=workflow_id), metadata=auth(stack.token))
    assert error.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_events_resume_after_a_sequence_number(stack, channel):
    workflow_id = stack.start()
    stack.service.set_stage(workflow_id, "jobs.hello", FAILED, exit_code=1)
    api = workflows(channel)
    events = api.ListEvents(
        pb.ListEventsRequest(workflow_id=workflow_id), metadata=auth(stack.token)
    ).events
    assert events[0].kind == "workflow_started"
    later = api.ListEvents(
        pb.ListEventsRequest(workflow_id=workflow_id, after_seq=events[0].seq),
        metadata=auth(stack.token),
    ).events
    assert list(later) == list(events[1:])


def test_read_logs_of_one_job_and_one_task(stack, channel):
    workflow_id = stack.start(TASKS)
    stack.service.emit_log(workflow_id, "jobs.hello", "a\n", task_id=1)
    stack.service.emit_log(workflow_id, "jobs.hello", "b\n", task_id=2)
    api = workflows(channel)
    every = api.ReadLogs(
        pb.ReadLogsRequest(workflow_id=workflow_id, stage_name="hello"), metadata=auth(stack.token)
    )
    assert [c.output for c in every.chunks] == [b"a\n", b"b\n"]
    one = api.ReadLogs(
        pb.ReadLogsRequest(workflow_id=workflow_id, stage_name="jobs.hello", task_id=2),
        metadata=auth(stack.token),
    )
    assert [(c.output, c.task_id) for c in one.chunks] == [(b"b\n", 2)]


def test_follow_logs_streams_until_the_workflow_ends(stack, channel):
    workflow_id = stack.start()
    stack.service.emit_log(workflow_id, "jobs.hello", "first\n")

    def finish_later() -> None:
        time.sleep(0.3)
        stack.service.emit_log(workflow_id, "jobs.hello", "second\n")
        stack.service.set_stage(workflow_id, "jobs.hello", FINISHED, exit_code=0)

    writer = threading.Thread(target=finish_later)
    writer.start()
    stream = workflows(channel).FollowLogs(
        pb.ReadLogsRequest(workflow_id=workflow_id, stage_name="hello"),
        metadata=auth(stack.token),
        timeout=10,
    )
    assert [c.output for c in stream] == [b"first\n", b"second\n"]
    writer.join()


def test_follow_logs_of_an_unknown_job_is_not_found(stack, channel):
    workflow_id = stack.start()
    stream = workflows(channel).FollowLogs(
        pb.ReadLogsRequest(workflow_id=workflow_id, stage_name="nosuch"),
        metadata=auth(stack.token),
        timeout=10,
    )
    with pytest.raises(grpc.RpcError) as error:
        list(stream)
    assert error.value.code() == grpc.StatusCode.NOT_FOUND
    assert "nosuch" in error.value.details()


def test_nodes_list_and_get(stack, channel):
    node = stack.service.add_node("n1", 4, 8 * 1024**3, devices={"gpu": 1})
    nodes = pb_grpc.NodeServiceStub(channel)
    _, admin = stack.service.create_account("root", admin=True)
    listed = nodes.ListNodes(pb.ListNodesRequest(), metadata=auth(admin)).nodes
    shown = next(n for n in listed if n.id == node.id)
    assert (shown.host_name, shown.cores, dict(shown.resource.total.devices)) == (
        "n1",
        4,
        {"gpu": 1},
    )
    assert nodes.GetNode(pb.GetNodeRequest(id="n1"), metadata=auth(admin)).id == node.id
    with pytest.raises(grpc.RpcError) as error:
        nodes.GetNode(pb.GetNodeRequest(id="ghost"), metadata=auth(admin))
    assert error.value.code() == grpc.StatusCode.NOT_FOUND


def test_a_user_listing_nodes_is_permission_denied(stack, channel):
    nodes = pb_grpc.NodeServiceStub(channel)
    with pytest.raises(grpc.RpcError) as error:
        nodes.ListNodes(pb.ListNodesRequest(), metadata=auth(stack.token))
    assert error.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "read_nodes" in (error.value.details() or "")


@pytest.mark.parametrize(
    ("peer", "address"),
    [
        ("ipv4:127.0.0.1:50051", "127.0.0.1"),
        ("ipv6:[::1]:50051", "::1"),
        ("unix:/run/fuzzball.sock", "unix:/run/fuzzball.sock"),
        ("", ""),
    ],
)
def test_a_grpc_callers_address_is_its_peer_without_the_port(peer, address):
    assert peer_address(peer) == address
