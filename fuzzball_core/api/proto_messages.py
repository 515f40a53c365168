"""Service views as ``fuzzball.v1`` messages: the one mapping both transports answer with.

The gRPC servicers send these messages; the REST gateway sends their JSON
(:func:`fuzzball_core.api.rest_messages.to_json`). Optional fields are set only when the view
has a value, so that the JSON leaves them out exactly when the view does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from google.protobuf import json_format, struct_pb2, timestamp_pb2

from fuzzball_core.api.rest_messages import whole_numbers
from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.errors import InvalidArgument
from fuzzball_core.service.views import (
    EventView,
    HoldView,
    LogChunkView,
    MeteringView,
    NodeView,
    StageExplanation,
    StageView,
    StartedWorkflow,
    WorkflowView,
)
from fuzzball_core.vocabulary import StageKind, Status

_GIB = 1024**3


def timestamp(value: float | None) -> timestamp_pb2.Timestamp | None:
    """A ``Timestamp`` of a Unix time, to the microsecond (what the store keeps); ``None``
    stays ``None`` (unset)."""
    if value is None:
        return None
    micros = round(value * 1_000_000)
    return timestamp_pb2.Timestamp(seconds=micros // 1_000_000, nanos=(micros % 1_000_000) * 1000)


def unix_time(stamp: timestamp_pb2.Timestamp) -> float:
    """The Unix time of a ``Timestamp``."""
    return stamp.seconds + stamp.nanos / 1e9


def status_enum(status: str) -> str:
    """The ``WorkflowStatus`` name of a view status (pending is ``STAGE_STATUS_UNSPECIFIED``);
    messages take enum values by name."""
    name = "UNSPECIFIED" if status == Status.PENDING else status
    return f"STAGE_STATUS_{name}"


def status_of(value: int) -> Status:
    """The view status of a ``WorkflowStatus`` number (``UNSPECIFIED`` is pending)."""
    name = pb.WorkflowStatus.Name(value).removeprefix("STAGE_STATUS_")
    return Status.PENDING if name == "UNSPECIFIED" else Status(name)


def kind_enum(kind: str) -> str:
    """The ``StageKind`` name of a view's stage kind (``job`` -> ``STAGE_KIND_JOB``)."""
    return f"STAGE_KIND_{kind.upper()}"


def kind_of(value: int) -> str:
    """The view's stage kind of a ``StageKind`` number (``STAGE_KIND_JOB`` -> ``job``)."""
    return pb.StageKind.Name(value).removeprefix("STAGE_KIND_").lower()


def _struct(data: Mapping[str, Any]) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    message.update(dict(data))
    return message


def _if_set(text: str) -> str | None:
    """An optional string field's value: unset rather than empty."""
    return text or None


def metering_message(metering: MeteringView | None) -> pb.TrafficMetering | None:
    """A ``TrafficMetering``; ``None`` (unset) for a stage never metered."""
    if metering is None:
        return None
    return pb.TrafficMetering(
        ingress_bytes=metering.ingress_bytes,
        ingress_packets=metering.ingress_packets,
        egress_bytes=metering.egress_bytes,
        egress_packets=metering.egress_packets,
    )


def metering_of(message: pb.StageDetails) -> MeteringView | None:
    """The :class:`MeteringView` of a stage's ``details``; ``None`` while it is unset."""
    if not message.HasField("metering"):
        return None
    counted = message.metering
    return MeteringView(
        ingress_bytes=counted.ingress_bytes,
        ingress_packets=counted.ingress_packets,
        egress_bytes=counted.egress_bytes,
        egress_packets=counted.egress_packets,
    )


def started_message(started: StartedWorkflow) -> pb.StartWorkflowResponse:
    """A ``StartWorkflowResponse``: the new workflow's id and its submission's warnings."""
    return pb.StartWorkflowResponse(id=started.id, warnings=list(started.warnings))


def stage_message(stage: StageView) -> pb.WorkflowStage:
    """A ``WorkflowStage``; the task counters are set for task arrays only, the metering for
    stages some run of which reported traffic; ``error`` is the stage's message unless it
    finished (``details.message`` always)."""
    array = stage.task_count is not None
    return pb.WorkflowStage(
        id=stage.id,
        name=stage.name,
        status=status_enum(stage.status),
        kind=kind_enum(stage.kind),
        # a finished stage's message ("exited with code 0") is no error: details say it
        error=_if_set(stage.message) if stage.status != Status.FINISHED else None,
        create_time=timestamp(stage.created_at),
        start_time=timestamp(stage.started_at),
        end_time=timestamp(stage.finished_at),
        details=pb.StageDetails(
            workflow_id=stage.workflow_id,
            node_ids=list(stage.node_ids),
            exit_code=stage.exit_code,
            attempt=stage.attempt,
            task_count=stage.task_count,
            tasks_finished=stage.tasks_finished if array else None,
            tasks_failed=stage.tasks_failed if array else None,
            tasks_running=stage.tasks_running if array else None,
            metering=metering_message(stage.metering),
            message=stage.message,
        ),
    )


def workflow_message(workflow: WorkflowView) -> pb.Workflow:
    """A ``Workflow``; its stages, of every kind, are the swagger's ``jobs``."""
    jobs = sum(1 for s in workflow.stages if s.kind == StageKind.JOB)
    return pb.Workflow(
        id=workflow.id,
        name=workflow.name,
        status=status_enum(workflow.status),
        account_id=workflow.account_id,
        create_time=timestamp(workflow.created_at),
        start_time=timestamp(workflow.started_at),
        end_time=timestamp(workflow.finished_at),
        error=_if_set(workflow.error),
        raw_specification=_if_set(workflow.raw_specification),
        jobs=[stage_message(s) for s in workflow.stages],
        total_jobs=jobs or None,
        annotations=dict(workflow.annotations),
        user_id=workflow.user_id,
        email=workflow.email,
        cluster_id=workflow.cluster_id,
        cluster_name=workflow.cluster_name,
        status_reason=workflow.status_reason,
    )


def workflow_status_message(workflow: WorkflowView) -> pb.GetWorkflowStatusResponse:
    """A ``GetWorkflowStatusResponse``: the stages under ``status.stages``."""
    return pb.GetWorkflowStatusResponse(
        id=workflow.id,
        name=workflow.name,
        workflow_status=status_enum(workflow.status),
        create_time=timestamp(workflow.created_at),
        start_time=timestamp(workflow.started_at),
        end_time=timestamp(workflow.finished_at),
        error=_if_set(workflow.error),
        status=pb.WorkflowPlan(stages=[stage_message(s) for s in workflow.stages]),
    )


def event_message(event: EventView) -> pb.WorkflowEvent:
    """A ``WorkflowEvent`` (of a workflow or of a node)."""
    return pb.WorkflowEvent(
        seq=event.seq,
        time=timestamp(event.time),
        kind=event.kind,
        message=event.message,
        workflow_id=event.workflow_id,
        stage_name=event.stage_name,
        node_id=event.node_id,
        data=_struct(event.data),
    )


def log_chunk_message(chunk: LogChunkView) -> pb.WorkflowLogChunk:
    """A ``WorkflowLogChunk`` (the text as UTF-8 bytes)."""
    return pb.WorkflowLogChunk(
        seq=chunk.seq,
        time=timestamp(chunk.time),
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
        reason=_if_set(hold.reason),
        placed_by=_if_set(hold.placed_by),
        place_time=timestamp(hold.placed_at),
    )


def explanation_message(explanation: StageExplanation) -> pb.StageExplanation:
    """A ``StageExplanation`` (``estimated_start_time`` unset when there is no estimate)."""
    return pb.StageExplanation(
        stage_name=explanation.stage_name,
        kind=kind_enum(explanation.kind),
        status=status_enum(explanation.status),
        reason=explanation.reason,
        message=_if_set(explanation.message),
        estimated_start_time=timestamp(explanation.estimated_start),
    )


def gib(size: int) -> float:
    """Bytes as GiB, to three decimals (the messages' ``*_gb`` fields)."""
    return round(size / _GIB, 3)


def _resource(cores: int, memory: int, devices: Mapping[str, int]) -> pb.Resource:
    return pb.Resource(
        cpu=pb.CpuResource(cores=cores), mem=pb.MemResource(bytes=memory), devices=dict(devices)
    )


def _node_resources(node: NodeView) -> pb.NodeResources:
    free_devices = {
        name: count - node.used_devices.get(name, 0) for name, count in node.devices.items()
    }
    return pb.NodeResources(
        total=_resource(node.cores, node.memory, node.devices),
        free=_resource(node.cores - node.used_cores, node.memory - node.used_memory, free_devices),
        annotations=dict(node.annotations),
    )


def node_list_message(node: NodeView) -> pb.ListNodeInfo:
    """A ``ListNodeInfo``, with the node's ``holds``."""
    return pb.ListNodeInfo(
        id=node.id,
        host_name=node.name,
        status=node.status,
        cores=node.cores,
        memory_gb=gib(node.memory),
        devices=sum(node.devices.values()),
        running_jobs=len(node.stages),
        resource=_node_resources(node),
        holds=[hold_message(h) for h in node.holds],
    )


def node_message(node: NodeView) -> pb.GetNodeInfo:
    """A ``GetNodeInfo``, with the running work as ``running_jobs`` and the node's ``holds``."""
    running = []
    for entry in node.stages:
        workflow_id, separator, stage_name = entry.partition("/")
        if not separator:  # another account's work: named only as IN_USE, with no workflow
            workflow_id, stage_name = "", entry
        running.append(pb.RunningJob(job_name=stage_name, workflow_id=workflow_id))
    summary = pb.ResourceSummary(
        total_cores=node.cores,
        available_cores=node.cores - node.used_cores,
        allocated_cores=node.used_cores,
        total_memory_gb=gib(node.memory),
        available_memory_gb=gib(node.memory - node.used_memory),
        allocated_memory_gb=gib(node.used_memory),
        device_summaries=[
            pb.DeviceTypeSummary(
                device_type=name,
                total_count=count,
                available_count=count - node.used_devices.get(name, 0),
            )
            for name, count in sorted(node.devices.items())
        ],
    )
    return pb.GetNodeInfo(
        id=node.id,
        host_name=node.name,
        status=node.status,
        memory_gb=gib(node.memory),
        running_jobs=running,
        resource_summary=summary,
        resource=_node_resources(node),
        holds=[hold_message(h) for h in node.holds],
        registered_at=timestamp(node.registered_at),
        last_seen=timestamp(node.last_seen),
    )


def definition_dict(definition: struct_pb2.Struct) -> dict[str, Any]:
    """A ``Struct`` as the plain document it stands for, whole numbers as ``int``.

    ``InvalidArgument`` for an infinite or NaN number, which a document cannot hold (Python's
    JSON reader accepts ``Infinity`` and ``NaN``, and a gRPC client may send them).
    """
    try:
        return whole_numbers(json_format.MessageToDict(definition))
    except ValueError:
        raise InvalidArgument("definition: numbers must be finite (no Infinity or NaN)") from None
