"""The public vocabulary: statuses, stage kinds and event kinds, declared once.

Every value here is part of the API (REST JSON, gRPC messages, ``fuzzball_event`` hook calls,
``fuzzball workflow events``), so plugins and clients may match on them; renaming one is a
breaking change. The enums are ``StrEnum`` so a stored or received string compares equal to its
member, and a member formats as its plain value.
"""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    """A workflow's or a stage's status.

    The REST API spells them ``STAGE_STATUS_<NAME>`` (PENDING is ``STAGE_STATUS_UNSPECIFIED``).
    """

    PENDING = "PENDING"
    STARTED = "STARTED"
    FINISHED = "FINISHED"
    FAILED = "FAILED"
    CANCELED = "CANCELED"

    @property
    def terminal(self) -> bool:
        """True once nothing more will happen to the workflow or stage."""
        return self in TERMINAL_STATUSES


#: Statuses nothing leaves.
TERMINAL_STATUSES = frozenset({Status.FINISHED, Status.FAILED, Status.CANCELED})


class StageKind(StrEnum):
    """What a stage stands for, as ``fuzzball workflow describe`` shows it."""

    WORKFLOW = "workflow"
    IMAGE = "image"
    VOLUME = "volume"
    JOB = "job"
    SERVICE = "service"


class NodeStatus(StrEnum):
    """Whether a registered node is holding its lease (or was torn down)."""

    READY = "READY"
    OFFLINE = "OFFLINE"
    #: a deprovision hold emptied the node and it was told to shut down
    DEPROVISIONED = "DEPROVISIONED"


class AccountKind(StrEnum):
    """What an account is, set when it is created: what it may do beyond its own workflows.

    ``admin`` sees and controls every account's work and places holds as ``admin``;
    ``monitoring`` and ``provisioner`` are service accounts that place and release node holds
    attributed to themselves (a hold's ``source``); ``user`` runs its own workflows.
    """

    ADMIN = "admin"
    MONITORING = "monitoring"
    PROVISIONER = "provisioner"
    USER = "user"


class EventKind(StrEnum):
    """Every kind of event Orchestrate records.

    Each is stored in the event log, served by ``GET /v3/workflows/{id}:events`` and
    ``/v3/nodes/{id}:events``, and passed to the ``fuzzball_event`` hook.
    """

    # A workflow's life.
    WORKFLOW_STARTED = "workflow_started"
    WORKFLOW_FINISHED = "workflow_finished"
    WORKFLOW_FAILED = "workflow_failed"
    WORKFLOW_CANCELED = "workflow_canceled"

    # A stage's life (jobs, services, images, volumes).
    STAGE_STARTED = "stage_started"
    STAGE_FINISHED = "stage_finished"
    STAGE_FAILED = "stage_failed"
    STAGE_CANCELED = "stage_canceled"
    SCHEDULED = "scheduled"
    SCHEDULING_BLOCKED = "scheduling_blocked"
    CONTAINER_EXITED = "container_exited"
    SERVICE_READY = "service_ready"
    RETRIED = "retried"
    RETRIES_EXHAUSTED = "retries_exhausted"
    EVICTED = "evicted"

    # Image stages.
    IMAGE_RESOLVED = "image_resolved"
    IMAGE_CACHED = "image_cached"
    IMAGE_PROGRESS = "image_progress"
    IMAGE_WRITTEN_BACK = "image_written_back"
    IMAGE_WRITE_BACK_RETRYING = "image_write_back_retrying"
    IMAGE_WRITE_BACK_ABANDONED = "image_write_back_abandoned"

    # Nodes.
    NODE_REGISTERED = "node_registered"
    NODE_ONLINE = "node_online"
    NODE_OFFLINE = "node_offline"
    NODE_REMOVED = "node_removed"
    NODE_HOLD_ADDED = "node_hold_added"
    NODE_HOLD_RELEASED = "node_hold_released"
    NODE_DEPROVISIONED = "node_deprovisioned"


#: The events of image stages, which ``fuzzball workflow status --watch`` shows as progress.
IMAGE_EVENT_KINDS = frozenset(
    {
        EventKind.IMAGE_RESOLVED,
        EventKind.IMAGE_CACHED,
        EventKind.IMAGE_PROGRESS,
        EventKind.IMAGE_WRITTEN_BACK,
        EventKind.IMAGE_WRITE_BACK_RETRYING,
        EventKind.IMAGE_WRITE_BACK_ABANDONED,
    }
)
