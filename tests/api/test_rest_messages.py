"""REST JSON as the proto3 JSON mapping of the fuzzball.v1 messages, both ways."""

from __future__ import annotations

import json

import pytest

from fuzzball_core.api.rest_messages import parse_request, read_reply, to_json
from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.errors import Internal, InvalidArgument

# -- replies ----------------------------------------------------------------------------------


def test_unset_optional_fields_are_left_out_and_plain_fields_always_written():
    stage = pb.WorkflowStage(id="1", name="jobs.a", details=pb.StageDetails(attempt=1))
    assert to_json(stage) == {
        "id": "1",
        "name": "jobs.a",
        "status": "STAGE_STATUS_UNSPECIFIED",
        "kind": "STAGE_KIND_UNSPECIFIED",
        "details": {"workflowId": "", "nodeIds": [], "attempt": 1, "message": ""},
    }


def test_an_optional_field_set_to_zero_is_written():
    details = pb.StageDetails(exit_code=0, attempt=1)
    assert to_json(details)["exitCode"] == 0


def test_int64_fields_are_strings_and_int32_fields_numbers():
    hold = to_json(pb.NodeHold(id=7, effect="cordon", source="admin"))
    resource = to_json(pb.Resource(cpu=pb.CpuResource(cores=4), mem=pb.MemResource(bytes=1024)))
    assert (hold["id"], resource["cpu"]["cores"], resource["mem"]["bytes"]) == ("7", 4, "1024")


def test_whole_numbers_in_a_struct_are_written_as_integers():
    event = pb.WorkflowEvent(seq=1, kind="image_progress")
    event.data.update({"done": 512, "share": 0.5, "steps": [1, 2]})
    # compared as text: to Python 512.0 == 512, but JSON readers see "512.0"
    written = json.dumps(to_json(event)["data"], sort_keys=True)
    assert written == '{"done": 512, "share": 0.5, "steps": [1, 2]}'


def test_the_keys_of_a_struct_are_sorted():
    event = pb.WorkflowEvent(seq=1, kind="node_hold_added")
    event.data.update({"source": "admin", "hold_id": 1, "effect": "cordon", "reason": "bios"})
    assert list(to_json(event)["data"]) == ["effect", "hold_id", "reason", "source"]


def test_keys_follow_the_order_the_proto_declares_its_fields():
    chunk = pb.WorkflowLogChunk(seq=3, stage_name="jobs.a", stream="stdout", output=b"hi")
    assert list(to_json(chunk)) == ["output", "seq", "stageName", "stream"]


def test_times_are_rfc3339_in_utc():
    workflow = pb.Workflow(id="w")
    workflow.create_time.FromSeconds(1_700_000_000)
    assert to_json(workflow)["createTime"] == "2023-11-14T22:13:20Z"


def test_a_reply_field_this_client_does_not_know_is_dropped():
    hold = read_reply({"id": "7", "effect": "cordon", "colour": "red"}, pb.NodeHold)
    assert (hold.id, hold.effect) == (7, "cordon")


def test_a_reply_that_does_not_fit_its_message_is_an_internal_error():
    with pytest.raises(Internal, match="NodeHold"):
        read_reply({"id": "seven"}, pb.NodeHold)


# -- requests ---------------------------------------------------------------------------------


def test_a_request_body_becomes_its_message():
    request = parse_request({"effect": "evict", "reason": "disk"}, pb.AddNodeHoldRequest)
    assert (request.effect, request.reason) == ("evict", "disk")


def test_the_proto_spelling_of_a_field_is_accepted_too():
    request = parse_request({"raw_specification": "x"}, pb.StartWorkflowRequest)
    assert request.raw_specification == "x"


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"effect": 3}, "effect: expected a string, got a number"),
        ({"effect": True}, "effect: expected a string, got a boolean"),
        ({"reason": ["a"]}, "reason: expected a string, got an array"),
        ({"colour": "red"}, "request body: unknown field 'colour'"),
        ({"nodeId": "n1"}, "request body: unknown field 'nodeId'"),
    ],
)
def test_a_field_that_does_not_fit_is_named(body, words):
    with pytest.raises(InvalidArgument) as refused:
        parse_request(body, pb.AddNodeHoldRequest, from_path=("node_id",))
    assert words in refused.value.message


def test_a_number_is_not_a_boolean():
    with pytest.raises(InvalidArgument, match="includeFinished: expected a boolean"):
        parse_request({"includeFinished": 1}, pb.ExplainWorkflowRequest)


def test_a_second_member_of_a_oneof_is_refused():
    with pytest.raises(InvalidArgument, match="either rawSpecification or definition, not both"):
        parse_request({"rawSpecification": "x", "definition": {}}, pb.StartWorkflowRequest)


def test_null_leaves_a_field_unset():
    request = parse_request({"rawSpecification": "x", "definition": None}, pb.StartWorkflowRequest)
    assert request.WhichOneof("source") == "raw_specification"


def test_fields_checked_apart_are_left_out_of_the_message():
    request = parse_request(
        {"rawSpecification": "x", "clusterId": 5}, pb.StartWorkflowRequest, ignored={"clusterId"}
    )
    assert request.raw_specification == "x"


def test_a_body_that_is_not_an_object_is_refused():
    with pytest.raises(InvalidArgument, match="expected a JSON object, got an array"):
        parse_request([1, 2], pb.StartWorkflowRequest)
