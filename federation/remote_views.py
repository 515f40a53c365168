"""A member's replies, as ``fuzzball.v1`` messages, back into service views.

Federate proxies a member's answers through its own gateway, which writes views as messages
again (``fuzzball_core.api.proto_messages``); each reader here is the reverse of the matching
``*_message`` function there. The member's JSON is read into those messages by the REST client,
so nothing here looks at JSON. Workflow ids are swapped for the federated ones by the caller,
not here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message

from fuzzball_core.api.proto_messages import kind_of, metering_of, status_of, unix_time
from fuzzball_core.api.rest_messages import whole_numbers
from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.service.views import (
    EventView,
    HoldView,
    LogChunkView,
    NodeView,
    StageExplanation,
    StageView,
    WorkflowView,
)


def _time(message: Message, field: str) -> float | None:
    """The Unix time of a ``Timestamp`` field; ``None`` while it is unset."""
    return unix_time(getattr(message, field)) if message.HasField(field) else None


def _optional(message: Message, field: str) -> Any:
    """An ``optional`` scalar field's value; ``None`` while it is unset."""
    return getattr(message, field) if message.HasField(field) else None


def stage_view(stage: pb.WorkflowStage, workflow_id: str) -> StageView:
    """A ``WorkflowStage`` as a :class:`StageView` of the workflow ``workflow_id``."""
    details = stage.details
    return StageView(
        id=stage.id,
        workflow_id=workflow_id,
        name=stage.name,
        kind=kind_of(stage.kind),
        status=status_of(stage.status),
        node_ids=tuple(details.node_ids),
        exit_code=_optional(details, "exit_code"),
        message=details.message or stage.error,  # a member before details.message: error
        attempt=details.attempt or 1,
        created_at=_time(stage, "create_time"),
        started_at=_time(stage, "start_time"),
        finished_at=_time(stage, "end_time"),
        task_count=_optional(details, "task_count"),
        tasks_finished=details.tasks_finished,
        tasks_failed=details.tasks_failed,
        tasks_running=details.tasks_running,
        metering=metering_of(details),
    )


def workflow_view(
    workflow: pb.Workflow, *, workflow_id: str, account_id: str, cluster: str = ""
) -> WorkflowView:
    """A ``Workflow`` as a :class:`WorkflowView` under Federate's id and owner, on the
    member Federate calls ``cluster`` (the member's own name for itself otherwise)."""
    return WorkflowView(
        id=workflow_id,
        name=workflow.name,
        status=status_of(workflow.status),
        account_id=account_id,
        created_at=_time(workflow, "create_time") or 0.0,
        started_at=_time(workflow, "start_time"),
        finished_at=_time(workflow, "end_time"),
        error=workflow.error,
        raw_specification=workflow.raw_specification,
        stages=tuple(stage_view(s, workflow_id) for s in workflow.jobs),
        annotations=dict(workflow.annotations),
        user_id=workflow.user_id,
        email=workflow.email,
        cluster_id=workflow.cluster_id,
        cluster_name=cluster or workflow.cluster_name,
        status_reason=workflow.status_reason,
    )


def event_view(event: pb.WorkflowEvent, *, workflow_id: str | None = None) -> EventView:
    """An event; ``workflow_id`` replaces the member's id when given."""
    return EventView(
        seq=event.seq,
        time=_time(event, "time") or 0.0,
        kind=event.kind,
        message=event.message,
        workflow_id=workflow_id if workflow_id is not None else _optional(event, "workflow_id"),
        stage_name=_optional(event, "stage_name"),
        node_id=_optional(event, "node_id"),
        # a Struct holds numbers as doubles: {"done": 5} was written, so 5 is passed on
        data=whole_numbers(json_format.MessageToDict(event.data)),
    )


def log_chunk_view(chunk: pb.WorkflowLogChunk) -> LogChunkView:
    """One chunk of a log stream."""
    return LogChunkView(
        seq=chunk.seq,
        time=_time(chunk, "time") or 0.0,
        stage_name=chunk.stage_name,
        stream=chunk.stream or "stdout",
        data=chunk.output.decode("utf-8", errors="replace"),
        task_id=_optional(chunk, "task_id"),
    )


def hold_view(hold: pb.NodeHold, *, node_id: str) -> HoldView:
    """A ``NodeHold`` of node ``node_id``."""
    return HoldView(
        id=hold.id,
        node_id=node_id,
        effect=hold.effect,
        source=hold.source,
        reason=hold.reason,
        placed_by=hold.placed_by,
        placed_at=_time(hold, "place_time") or 0.0,
    )


def explanation_view(explanation: pb.StageExplanation) -> StageExplanation:
    """One stage of ``GET /workflows/{id}:why``."""
    return StageExplanation(
        stage_name=explanation.stage_name,
        kind=kind_of(explanation.kind),
        status=status_of(explanation.status),
        reason=explanation.reason,
        message=explanation.message,
        estimated_start=_time(explanation, "estimated_start_time"),
    )


def node_view(
    node: pb.ListNodeInfo | pb.GetNodeInfo, *, extra_annotations: Mapping[str, str]
) -> NodeView:
    """A node of a listing or a ``GetNodeInfo``, with ``extra_annotations`` added.

    Only a ``GetNodeInfo`` names the running work; a listing counts it.
    """
    total, free = node.resource.total, node.resource.free
    devices = dict(total.devices)
    free_devices = dict(free.devices)
    running = node.running_jobs if isinstance(node, pb.GetNodeInfo) else ()
    cores = total.cpu.cores or (node.cores if isinstance(node, pb.ListNodeInfo) else 0)
    return NodeView(
        id=node.id,
        name=node.host_name,
        status=node.status,
        cores=cores,
        memory=total.mem.bytes,
        devices=devices,
        annotations={**node.resource.annotations, **extra_annotations},
        used_cores=cores - free.cpu.cores,
        used_memory=total.mem.bytes - free.mem.bytes,
        used_devices={k: v - free_devices.get(k, 0) for k, v in devices.items()},
        registered_at=_time(node, "registered_at") if isinstance(node, pb.GetNodeInfo) else None,
        last_seen=_time(node, "last_seen") if isinstance(node, pb.GetNodeInfo) else None,
        # as the member shows it; Federate's service hides what the caller may not see
        stages=tuple(
            f"{r.workflow_id}/{r.job_name}" if r.workflow_id else r.job_name for r in running
        ),
        holds=tuple(hold_view(h, node_id=node.id) for h in node.holds),
    )
