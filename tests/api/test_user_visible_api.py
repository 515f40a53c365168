"""What a user sees through both transports: a start's warnings, a workflow's annotations, the
traffic each stage's containers metered, and the exit code on ``stage_failed``."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from support.live_api import BOTH, TASKS, WARNED, Stack, warned
from test_rest_gateway import call, get

from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.api.v1 import client_pb2_grpc as pb_grpc
from fuzzball_core.service.views import FAILED, FINISHED

#: What a node's meters counted for one run.
COUNTED = {
    "ingress_bytes": 52_000,
    "ingress_packets": 40,
    "egress_bytes": 3_000,
    "egress_packets": 9,
}


@pytest.fixture
def workflows(stack: Stack) -> Iterator[tuple[pb_grpc.WorkflowServiceStub, list]]:
    with grpc.insecure_channel(stack.servers.grpc_target) as channel:
        yield pb_grpc.WorkflowServiceStub(channel), [("authorization", f"Bearer {stack.token}")]


def rest_start(stack: Stack, spec: str) -> dict:
    response = call(stack, "POST", "/workflows", json={"rawSpecification": spec})
    assert response.status_code == 200, response.text
    return response.json()


def job_stage(workflow: dict, name: str = "jobs.hello") -> dict:
    return next(stage for stage in workflow["jobs"] if stage["name"] == name)


# -- warnings -------------------------------------------------------------------------------


def test_a_rest_start_replies_with_the_files_warnings(stack):
    reply = rest_start(stack, WARNED)
    assert list(reply) == ["id", "warnings"]
    assert warned(reply["warnings"]) == BOTH


def test_a_rest_start_of_a_clean_file_replies_with_no_warnings(stack):
    reply = rest_start(stack, TASKS)
    assert reply["warnings"] == []


def test_a_grpc_start_replies_with_the_files_warnings(workflows):
    stub, metadata = workflows
    reply = stub.StartWorkflow(pb.StartWorkflowRequest(raw_specification=WARNED), metadata=metadata)
    assert reply.id
    assert warned(list(reply.warnings)) == BOTH


# -- annotations ----------------------------------------------------------------------------


def test_a_workflows_annotations_are_shown_over_rest(stack):
    workflow_id = rest_start(stack, WARNED)["id"]
    assert get(stack, f"/workflows/{workflow_id}").json()["annotations"] == {
        "team": "genomics",
        "zone": "lab-2",
    }


def test_a_workflows_annotations_are_shown_over_grpc(stack, workflows):
    stub, metadata = workflows
    workflow_id = stack.start(WARNED)
    workflow = stub.GetWorkflow(pb.WorkflowIdRequest(id=workflow_id), metadata=metadata)
    assert dict(workflow.annotations) == {"team": "genomics", "zone": "lab-2"}


# -- metering -------------------------------------------------------------------------------


def test_a_stages_traffic_is_shown_in_its_details_over_rest(stack):
    workflow_id = stack.start()
    stack.service.set_stage(workflow_id, "jobs.hello", FINISHED, metering=COUNTED)
    details = job_stage(get(stack, f"/workflows/{workflow_id}").json())["details"]
    # int64 counters are strings in proto3 JSON, as memory bytes are
    assert details["metering"] == {
        "ingressBytes": "52000",
        "ingressPackets": "40",
        "egressBytes": "3000",
        "egressPackets": "9",
    }


def test_a_task_arrays_traffic_is_summed_over_its_tasks_over_grpc(stack, workflows):
    stub, metadata = workflows
    workflow_id = stack.start(TASKS)
    for task in (1, 2):
        stack.service.set_stage(workflow_id, "jobs.hello", FINISHED, task_id=task, metering=COUNTED)
    workflow = stub.GetWorkflow(pb.WorkflowIdRequest(id=workflow_id), metadata=metadata)
    (stage,) = [s for s in workflow.jobs if s.name == "jobs.hello"]
    metering = stage.details.metering
    assert (metering.ingress_bytes, metering.egress_packets) == (104_000, 18)


def test_a_stage_never_metered_shows_no_metering(stack):
    workflow_id = stack.start()
    stack.service.set_stage(workflow_id, "jobs.hello", FINISHED)
    assert "metering" not in job_stage(get(stack, f"/workflows/{workflow_id}").json())["details"]


# -- exit codes -----------------------------------------------------------------------------


def test_a_stage_failed_event_carries_the_exit_code_over_rest(stack):
    workflow_id = stack.start()
    stack.service.set_stage(workflow_id, "jobs.hello", FAILED, exit_code=3)
    events = get(stack, f"/workflows/{workflow_id}:events").json()["events"]
    (failed,) = [e for e in events if e["kind"] == "stage_failed"]
    assert failed["data"] == {"exit_code": 3}


def test_a_stage_failed_event_carries_the_exit_code_over_grpc(stack, workflows):
    stub, metadata = workflows
    workflow_id = stack.start()
    stack.service.set_stage(workflow_id, "jobs.hello", FAILED, exit_code=3)
    reply = stub.ListEvents(pb.ListEventsRequest(workflow_id=workflow_id), metadata=metadata)
    (failed,) = [e for e in reply.events if e.kind == "stage_failed"]
    assert failed.data["exit_code"] == 3
