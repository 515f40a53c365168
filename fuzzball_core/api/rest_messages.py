"""Service views as Fuzzball's REST JSON (API v3: camelCase, RFC 3339 times, enum names).

Field names follow ``fuzzball-api-v3.3.swagger.json``; fields the swagger lacks (``status`` of
a node, task counters of a stage, ``warnings`` of a validation, node ``holds``, stage
explanations) are additions, never renamings. Unset values (``None``) are left out, as
grpc-gateway leaves out unset fields.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
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

_GIB = 1024**3


def rfc3339(timestamp: float | None) -> str | None:
    """``2024-05-01T10:00:00.250000Z`` for a Unix time; ``None`` stays ``None``."""
    if timestamp is None:
        return None
    moment = datetime.fromtimestamp(timestamp, UTC)
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


def status_enum(status: str) -> str:
    """``STAGE_STATUS_<STATUS>``; pending is ``STAGE_STATUS_UNSPECIFIED`` as in the swagger."""
    return "STAGE_STATUS_UNSPECIFIED" if status == PENDING else f"STAGE_STATUS_{status}"


def kind_enum(kind: str) -> str:
    """``STAGE_KIND_<KIND>`` for a stage kind (``job`` -> ``STAGE_KIND_JOB``)."""
    return f"STAGE_KIND_{kind.upper()}"


def _compact(message: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in message.items() if value is not None}


def stage_json(stage: StageView) -> dict[str, Any]:
    """A ``WorkflowStage``; what the swagger has no field for goes under ``details``."""
    details = _compact(
        {
            "workflowId": stage.workflow_id,
            "nodeIds": list(stage.node_ids),
            "exitCode": stage.exit_code,
            "attempt": stage.attempt,
            "taskCount": stage.task_count,
            "tasksFinished": stage.tasks_finished if stage.task_count is not None else None,
            "tasksFailed": stage.tasks_failed if stage.task_count is not None else None,
            "tasksRunning": stage.tasks_running if stage.task_count is not None else None,
        }
    )
    return _compact(
        {
            "id": stage.id,
            "name": stage.name,
            "status": status_enum(stage.status),
            "kind": kind_enum(stage.kind),
            "error": stage.message or None,
            "createTime": rfc3339(stage.created_at),
            "startTime": rfc3339(stage.started_at),
            "endTime": rfc3339(stage.finished_at),
            "details": details,
        }
    )


def workflow_json(workflow: WorkflowView) -> dict[str, Any]:
    """A ``Workflow``; its stages, of every kind, are the swagger's ``jobs``."""
    return _compact(
        {
            "id": workflow.id,
            "name": workflow.name,
            "status": status_enum(workflow.status),
            "accountId": workflow.account_id,
            "createTime": rfc3339(workflow.created_at),
            "startTime": rfc3339(workflow.started_at),
            "endTime": rfc3339(workflow.finished_at),
            "error": workflow.error or None,
            "rawSpecification": workflow.raw_specification or None,
            "jobs": [stage_json(s) for s in workflow.stages] if workflow.stages else None,
            "totalJobs": sum(1 for s in workflow.stages if s.kind == "job") or None,
        }
    )


def workflow_status_json(workflow: WorkflowView) -> dict[str, Any]:
    """A ``GetWorkflowStatusResponse``: the stages under ``status.stages``."""
    return _compact(
        {
            "id": workflow.id,
            "name": workflow.name,
            "workflowStatus": status_enum(workflow.status),
            "status": {"stages": [stage_json(s) for s in workflow.stages]},
            "createTime": rfc3339(workflow.created_at),
            "startTime": rfc3339(workflow.started_at),
            "endTime": rfc3339(workflow.finished_at),
            "error": workflow.error or None,
        }
    )


def event_json(event: EventView) -> dict[str, Any]:
    """One event of ``GET /workflows/{id}:events`` (our addition to the API)."""
    return _compact(
        {
            "seq": event.seq,
            "time": rfc3339(event.time),
            "kind": event.kind,
            "message": event.message,
            "workflowId": event.workflow_id,
            "stageName": event.stage_name,
            "nodeId": event.node_id,
            "data": dict(event.data),
        }
    )


def log_result_json(chunk: LogChunkView) -> dict[str, Any]:
    """A ``WorkflowGatewayLogResponse`` (``output`` is base64, as JSON carries bytes)."""
    return _compact(
        {
            "output": base64.b64encode(chunk.data.encode()).decode("ascii"),
            "seq": chunk.seq,
            "time": rfc3339(chunk.time),
            "stageName": chunk.stage_name,
            "stream": chunk.stream,
            "taskId": chunk.task_id,
        }
    )


def _resource(cores: int, memory: int, devices: dict[str, int]) -> dict[str, Any]:
    return {"cpu": {"cores": cores}, "mem": {"bytes": str(memory)}, "devices": devices}


def _node_resource(node: NodeView) -> dict[str, Any]:
    free_devices = {
        name: count - node.used_devices.get(name, 0) for name, count in node.devices.items()
    }
    return {
        "total": _resource(node.cores, node.memory, dict(node.devices)),
        "free": _resource(
            node.cores - node.used_cores, node.memory - node.used_memory, free_devices
        ),
        "annotations": dict(node.annotations),
    }


def hold_json(hold: HoldView) -> dict[str, Any]:
    """A ``NodeHold`` (our addition): the id is a string, as grpc-gateway writes an int64."""
    return _compact(
        {
            "id": str(hold.id),
            "effect": hold.effect,
            "source": hold.source,
            "reason": hold.reason or None,
            "placedBy": hold.placed_by or None,
            "placeTime": rfc3339(hold.placed_at),
        }
    )


def explanation_json(explanation: StageExplanation) -> dict[str, Any]:
    """One stage of ``GET /workflows/{id}:why`` (our addition): why it is where it is."""
    return _compact(
        {
            "stageName": explanation.stage_name,
            "kind": kind_enum(explanation.kind),
            "status": status_enum(explanation.status),
            "reason": explanation.reason,
            "message": explanation.message or None,
            "estimatedStartTime": rfc3339(explanation.estimated_start),
        }
    )


def node_list_json(node: NodeView) -> dict[str, Any]:
    """A ``ListNodeInfo``, with the node's ``holds``."""
    return _compact(
        {
            "id": node.id,
            "hostName": node.name,
            "status": node.status,
            "cores": node.cores,
            "memoryGb": round(node.memory / _GIB, 3),
            "devices": sum(node.devices.values()),
            "runningJobs": len(node.stages),
            "resource": _node_resource(node),
            "holds": [hold_json(h) for h in node.holds],
        }
    )


def node_json(node: NodeView) -> dict[str, Any]:
    """A ``GetNodeInfo``, with the running work as ``runningJobs`` and the node's ``holds``."""
    running = []
    for entry in node.stages:
        workflow_id, _, stage_name = entry.partition("/")
        running.append({"jobName": stage_name, "workflowId": workflow_id})
    return _compact(
        {
            "id": node.id,
            "hostName": node.name,
            "status": node.status,
            "memoryGb": round(node.memory / _GIB, 3),
            "runningJobs": running,
            "resourceSummary": {
                "totalCores": node.cores,
                "availableCores": node.cores - node.used_cores,
                "allocatedCores": node.used_cores,
                "totalMemoryGb": round(node.memory / _GIB, 3),
                "availableMemoryGb": round((node.memory - node.used_memory) / _GIB, 3),
                "allocatedMemoryGb": round(node.used_memory / _GIB, 3),
                "deviceSummaries": [
                    {
                        "deviceType": name,
                        "totalCount": count,
                        "availableCount": count - node.used_devices.get(name, 0),
                    }
                    for name, count in sorted(node.devices.items())
                ],
            },
            "resource": _node_resource(node),
            "holds": [hold_json(h) for h in node.holds],
            "registeredAt": rfc3339(node.registered_at),
            "lastSeen": rfc3339(node.last_seen),
        }
    )
