"""Service views as ``fuzzball.v1`` protobuf messages, and request ``Struct`` s back to dicts."""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format, struct_pb2, timestamp_pb2

from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.service.views import (
    PENDING,
    EventView,
    HoldView,
    LogChunkView,
    NodeView,
    StageExplanation,
    StageView,
    WorkflowView,
)


def _timestamp(value: float | None) -> timestamp_pb2.Timestamp | None:
    if value is None:
        return None
    stamp = timestamp_pb2.Timestamp()
    seconds = int(value // 1)
    stamp.seconds, stamp.nanos = seconds, round((value - seconds) * 1e9) % 1_000_000_000
    return stamp


def status_value(status: str) -> int:
    """The ``WorkflowStatus`` number of a view status (pending is ``UNSPECIFIED``)."""
    name = "STAGE_STATUS_UNSPECIFIED" if status == PENDING else f"STAGE_STATUS_{status}"
    return pb.WorkflowStatus.Value(name)


def _kind_value(kind: str) -> int:
    return pb.StageKind.Value(f"STAGE_KIND_{kind.upper()}")


def _struct(data: Any) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    message.update(dict(data))
    return message


def stage_message(stage: StageView) -> pb.WorkflowStage:
    """A ``WorkflowStage``."""
    return pb.WorkflowStage(
        id=stage.id,
        workflow_id=stage.workflow_id,
        name=stage.name,
        kind=_kind_value(stage.kind),
        status=status_value(stage.status),
        node_ids=list(stage.node_ids),
        exit_code=stage.exit_code,
        message=stage.message,
        attempt=stage.attempt,
        create_time=_timestamp(stage.created_at),
        start_time=_timestamp(stage.started_at),
        end_time=_timestamp(stage.finished_at),
        task_count=stage.task_count,
        tasks_finished=stage.tasks_finished,
        tasks_failed=stage.tasks_failed,
        tasks_running=stage.tasks_running,
    )


def workflow_message(workflow: WorkflowView) -> pb.Workflow:
    """A ``Workflow`` with its stages."""
    return pb.Workflow(
        id=workflow.id,
        name=workflow.name,
        status=status_value(workflow.status),
        account_id=workflow.account_id,
        create_time=_timestamp(workflow.created_at),
        start_time=_timestamp(workflow.started_at),
        end_time=_timestamp(workflow.finished_at),
        error=workflow.error,
        raw_specification=workflow.raw_specification,
        stages=[stage_message(s) for s in workflow.stages],
    )


def workflow_status_message(workflow: WorkflowView) -> pb.GetWorkflowStatusResponse:
    """A ``GetWorkflowStatusResponse``."""
    return pb.GetWorkflowStatusResponse(
        id=workflow.id,
        name=workflow.name,
        workflow_status=status_value(workflow.status),
        create_time=_timestamp(workflow.created_at),
        start_time=_timestamp(workflow.started_at),
        end_time=_timestamp(workflow.finished_at),
        error=workflow.error,
        stages=[stage_message(s) for s in workflow.stages],
    )


def event_message(event: EventView) -> pb.WorkflowEvent:
    """A ``WorkflowEvent``."""
    return pb.WorkflowEvent(
        seq=event.seq,
        time=_timestamp(event.time),
        kind=event.kind,
        message=event.message,
        workflow_id=event.workflow_id or "",
        stage_name=event.stage_name or "",
        node_id=event.node_id or "",
        data=_struct(event.data),
    )


def log_chunk_message(chunk: LogChunkView) -> pb.WorkflowLogChunk:
    """A ``WorkflowLogChunk`` (the text as UTF-8 bytes)."""
    return pb.WorkflowLogChunk(
        seq=chunk.seq,
        time=_timestamp(chunk.time),
        stage_name=chunk.stage_name,
        stream=chunk.stream,
        output=chunk.data.encode(),
        task_id=chunk.task_id,
    )


def hold_message(hold: HoldView) -> pb.NodeHold:
    """A ``NodeHold``."""
    return pb.NodeHold(
        id=hold.id,
        effect=hold.effect,
        source=hold.source,
        reason=hold.reason,
        placed_by=hold.placed_by,
        place_time=_timestamp(hold.placed_at),
    )


def explanation_message(explanation: StageExplanation) -> pb.StageExplanation:
    """A ``StageExplanation`` (``estimated_start_time`` unset when there is no estimate)."""
    return pb.StageExplanation(
        stage_name=explanation.stage_name,
        kind=_kind_value(explanation.kind),
        status=status_value(explanation.status),
        reason=explanation.reason,
        message=explanation.message,
        estimated_start_time=_timestamp(explanation.estimated_start),
    )


def node_message(node: NodeView) -> pb.NodeInfo:
    """A ``NodeInfo``."""
    return pb.NodeInfo(
        id=node.id,
        name=node.name,
        status=node.status,
        cores=node.cores,
        memory=node.memory,
        devices=dict(node.devices),
        annotations=dict(node.annotations),
        used_cores=node.used_cores,
        used_memory=node.used_memory,
        used_devices=dict(node.used_devices),
        registered_at=_timestamp(node.registered_at),
        last_seen=_timestamp(node.last_seen),
        stages=list(node.stages),
        holds=[hold_message(h) for h in node.holds],
    )


def definition_dict(definition: struct_pb2.Struct) -> dict[str, Any]:
    """A ``Struct`` as the plain document it stands for.

    A ``Struct`` holds every number as a double; whole numbers come back as ``int`` so that
    ``cores: 2`` reads as it was written.
    """
    return _whole_numbers(json_format.MessageToDict(definition))


def _whole_numbers(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _whole_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_whole_numbers(item) for item in value]
    return value
