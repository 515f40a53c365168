"""A member's REST JSON back into service views: the reverse of ``api/rest_messages.py``.

Federate proxies a member's answers through its own gateway, which writes views as JSON
again; so each reader here undoes exactly what the matching ``*_json`` function wrote.
Workflow ids are swapped for the federated ones by the caller, not here.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from datetime import datetime
from typing import Any

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

_STATUS_PREFIX = "STAGE_STATUS_"
_KIND_PREFIX = "STAGE_KIND_"


def unix_time(text: str | None) -> float | None:
    """The Unix time of an RFC 3339 timestamp (``...Z``); ``None`` stays ``None``."""
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def status_of(enum: str | None) -> str:
    """``STAGE_STATUS_FINISHED`` -> ``FINISHED``; ``STAGE_STATUS_UNSPECIFIED`` -> pending."""
    name = (enum or "").removeprefix(_STATUS_PREFIX)
    return PENDING if name in ("", "UNSPECIFIED") else name


def kind_of(enum: str | None) -> str:
    """``STAGE_KIND_JOB`` -> ``job``."""
    return (enum or "").removeprefix(_KIND_PREFIX).lower()


def stage_view(stage: Mapping[str, Any], workflow_id: str) -> StageView:
    """A ``WorkflowStage`` as a :class:`StageView` of the workflow ``workflow_id``."""
    details = stage.get("details") or {}
    task_count = details.get("taskCount")
    return StageView(
        id=str(stage.get("id", "")),
        workflow_id=workflow_id,
        name=str(stage.get("name", "")),
        kind=kind_of(stage.get("kind")),
        status=status_of(stage.get("status")),
        node_ids=tuple(details.get("nodeIds") or ()),
        exit_code=details.get("exitCode"),
        message=str(stage.get("error", "")),
        attempt=int(details.get("attempt", 1)),
        created_at=unix_time(stage.get("createTime")),
        started_at=unix_time(stage.get("startTime")),
        finished_at=unix_time(stage.get("endTime")),
        task_count=task_count,
        tasks_finished=int(details.get("tasksFinished") or 0),
        tasks_failed=int(details.get("tasksFailed") or 0),
        tasks_running=int(details.get("tasksRunning") or 0),
    )


def workflow_view(
    workflow: Mapping[str, Any], *, workflow_id: str, account_id: str
) -> WorkflowView:
    """A ``Workflow`` as a :class:`WorkflowView` under Federate's id and owner."""
    return WorkflowView(
        id=workflow_id,
        name=str(workflow.get("name", "")),
        status=status_of(workflow.get("status")),
        account_id=account_id,
        created_at=unix_time(workflow.get("createTime")) or 0.0,
        started_at=unix_time(workflow.get("startTime")),
        finished_at=unix_time(workflow.get("endTime")),
        error=str(workflow.get("error", "")),
        raw_specification=str(workflow.get("rawSpecification", "")),
        stages=tuple(stage_view(s, workflow_id) for s in workflow.get("jobs") or ()),
    )


def event_view(event: Mapping[str, Any], *, workflow_id: str | None = None) -> EventView:
    """An event; ``workflow_id`` replaces the member's id when given."""
    return EventView(
        seq=int(event.get("seq", 0)),
        time=unix_time(event.get("time")) or 0.0,
        kind=str(event.get("kind", "")),
        message=str(event.get("message", "")),
        workflow_id=workflow_id if workflow_id is not None else event.get("workflowId"),
        stage_name=event.get("stageName"),
        node_id=event.get("nodeId"),
        data=dict(event.get("data") or {}),
    )


def log_chunk_view(result: Mapping[str, Any]) -> LogChunkView:
    """One ``result`` of a log stream (``output`` is base64)."""
    return LogChunkView(
        seq=int(result.get("seq", 0)),
        time=unix_time(result.get("time")) or 0.0,
        stage_name=str(result.get("stageName", "")),
        stream=str(result.get("stream", "stdout")),
        data=base64.b64decode(result.get("output", "")).decode("utf-8", errors="replace"),
        task_id=result.get("taskId"),
    )


def hold_view(hold: Mapping[str, Any], *, node_id: str) -> HoldView:
    """A ``NodeHold`` of node ``node_id``."""
    return HoldView(
        id=int(hold.get("id", 0)),
        node_id=node_id,
        effect=str(hold.get("effect", "")),
        source=str(hold.get("source", "")),
        reason=str(hold.get("reason", "")),
        placed_by=str(hold.get("placedBy", "")),
        placed_at=unix_time(hold.get("placeTime")) or 0.0,
    )


def explanation_view(explanation: Mapping[str, Any]) -> StageExplanation:
    """One stage of ``GET /workflows/{id}:why``."""
    return StageExplanation(
        stage_name=str(explanation.get("stageName", "")),
        kind=kind_of(explanation.get("kind")),
        status=status_of(explanation.get("status")),
        reason=str(explanation.get("reason", "")),
        message=str(explanation.get("message", "")),
        estimated_start=unix_time(explanation.get("estimatedStartTime")),
    )


def _mem(resource: Mapping[str, Any]) -> int:
    return int((resource.get("mem") or {}).get("bytes") or 0)


def node_view(node: Mapping[str, Any], *, extra_annotations: Mapping[str, str]) -> NodeView:
    """A ``ListNodeInfo`` or ``GetNodeInfo``, with ``extra_annotations`` added."""
    resource = node.get("resource") or {}
    total, free = resource.get("total") or {}, resource.get("free") or {}
    cores = int((total.get("cpu") or {}).get("cores") or node.get("cores") or 0)
    memory = _mem(total)
    devices = {str(k): int(v) for k, v in (total.get("devices") or {}).items()}
    free_devices = {str(k): int(v) for k, v in (free.get("devices") or {}).items()}
    node_id = str(node.get("id", ""))
    running = node.get("runningJobs")
    stages = (
        tuple(f"{r.get('workflowId', '')}/{r.get('jobName', '')}" for r in running)
        if isinstance(running, list)
        else ()
    )
    return NodeView(
        id=node_id,
        name=str(node.get("hostName", "")),
        status=str(node.get("status", "")),
        cores=cores,
        memory=memory,
        devices=devices,
        annotations={**(resource.get("annotations") or {}), **extra_annotations},
        used_cores=cores - int((free.get("cpu") or {}).get("cores") or 0),
        used_memory=memory - _mem(free),
        used_devices={k: v - free_devices.get(k, 0) for k, v in devices.items()},
        registered_at=unix_time(node.get("registeredAt")),
        last_seen=unix_time(node.get("lastSeen")),
        stages=stages,
        holds=tuple(hold_view(h, node_id=node_id) for h in node.get("holds") or ()),
    )
