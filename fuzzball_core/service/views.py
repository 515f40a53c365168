"""What the service layer hands to the API layer: plain, immutable views of stored state.

The gRPC servicers and the REST gateway turn these into wire messages; nothing above the
service layer sees a database row.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from fuzzball_core.service.permissions import permissions_for
from fuzzball_core.vocabulary import TERMINAL_STATUSES, AccountKind, CredentialKind, Status

# The statuses under the names the service layer and its callers have always imported; the
# vocabulary declares them (the REST API spells them STAGE_STATUS_<NAME>; PENDING is
# STAGE_STATUS_UNSPECIFIED there).
PENDING = Status.PENDING
STARTED = Status.STARTED
FINISHED = Status.FINISHED
FAILED = Status.FAILED
CANCELED = Status.CANCELED
TERMINAL = TERMINAL_STATUSES
#: how a node view shows a run of an account the caller may not see: that the node is in
#: use, without the workflow's id or the job's name
IN_USE = "in use"


@dataclass(frozen=True)
class Principal:
    """The authenticated caller of an API request.

    ``account_id``/``name`` are the account in use (whose workflows the caller runs and
    sees); ``user_id``/``email`` the user acting in it (None for a service account);
    ``organization_id`` the organization both belong to (None for the cluster's service
    accounts). ``permissions`` are what the caller may do beyond the account's own
    workflows, fixed when the credential was authenticated (:mod:`fuzzball_core.service.
    permissions` computes them from the role, the account kind and the credential).
    """

    account_id: str
    name: str
    #: a cluster administrator (a user with clusterAdmin, or the ``admin`` service account)
    is_admin: bool = False
    #: what the account is (an AccountKind), set when it was created
    kind: str = AccountKind.USER
    user_id: str | None = None
    email: str | None = None
    organization_id: str | None = None
    #: the user's OrganizationRole (None for a service account)
    role: str | None = None
    #: a CredentialKind: an account's API token, a login access token or a workflow's token
    credential: str = CredentialKind.API
    #: the workflow whose token this is (credential ``workflow``)
    workflow_id: str | None = None
    #: None (the default) means the permissions of the kind, role and credential
    permissions: frozenset[str] | None = None
    #: where the request came from (the client's address, as the server saw it), for the
    #: audit log; empty when not known (the server's own command line)
    source: str = ""
    #: for a Federate's caller acting on this cluster through a forwarded identity, the
    #: account of the Federate that vouches for it (``account_id`` is then the account this
    #: cluster keeps for that caller); None for everyone else
    forwarded_by: str | None = None

    def __post_init__(self) -> None:
        if self.permissions is None:  # callers that name no permissions get their kind's own
            granted = permissions_for(
                self.kind, role=self.role, cluster_admin=self.is_admin, credential=self.credential
            )
            object.__setattr__(self, "permissions", granted)

    def coming_from(self, address: str) -> Principal:
        """This caller, making a request from ``address``."""
        return dataclasses.replace(self, source=address)

    def may(self, permission: str) -> bool:
        """Whether the caller holds ``permission`` (a :class:`Permission`)."""
        return self.permissions is not None and permission in self.permissions


@dataclass(frozen=True)
class MeteringView:
    """Traffic of containers as their eBPF meters counted it: bytes and packets received
    (ingress) and sent (egress)."""

    ingress_bytes: int = 0
    ingress_packets: int = 0
    egress_bytes: int = 0
    egress_packets: int = 0

    @classmethod
    def total(cls, counters: Iterable[Mapping[str, Any]]) -> MeteringView | None:
        """The sum of ``counters`` (mappings of the four fields, as nodes report them);
        ``None`` when there are none, so "never metered" stays apart from "no traffic"."""
        counted = list(counters)
        if not counted:
            return None
        names = [f.name for f in fields(cls)]
        return cls(**{name: sum(int(c.get(name, 0)) for c in counted) for name in names})


@dataclass(frozen=True)
class StageView:
    """One stage of a workflow. Task arrays are one stage with task counters."""

    id: str
    workflow_id: str
    name: str  # "jobs.hello", "images.base", "volumes.data", or the workflow's own name
    kind: str  # a StageKind
    status: str  # a Status
    node_ids: tuple[str, ...] = ()
    exit_code: int | None = None
    message: str = ""
    attempt: int = 1
    created_at: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    task_count: int | None = None  # tasks in a task array; None for other stages
    tasks_finished: int = 0
    tasks_failed: int = 0
    tasks_running: int = 0
    #: the traffic of its runs (every attempt and task, every node); None: never metered
    metering: MeteringView | None = None


@dataclass(frozen=True)
class WorkflowView:
    """A workflow with its stages (``stages`` is empty in listings)."""

    id: str
    name: str
    status: str
    account_id: str
    created_at: float
    started_at: float | None = None
    finished_at: float | None = None
    error: str = ""
    raw_specification: str = ""
    stages: tuple[StageView, ...] = ()
    #: the definition's own top-level ``annotations``
    annotations: Mapping[str, str] = field(default_factory=dict)
    #: the user who started it and their email (empty: started with an account's own token)
    user_id: str = ""
    email: str = ""
    #: the cluster it runs on: its id and its name (``orchestrate.cluster-name``; on Federate
    #: the member's)
    cluster_id: str = ""
    cluster_name: str = ""
    #: why its status is not the cluster's own (Federate: the member is unreachable, so the
    #: status is UNKNOWN until it answers again); empty when the status is the cluster's
    status_reason: str = ""


@dataclass(frozen=True)
class StartedWorkflow:
    """A workflow just stored: its id, and the warnings its submission drew (each starting
    with the field path it concerns), which the caller is shown."""

    id: str
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class EventView:
    """One recorded event; ``seq`` increases strictly, so callers resume with ``after_seq``."""

    seq: int
    time: float
    kind: str  # an EventKind: workflow_started, stage_started, stage_finished, ...
    message: str = ""
    workflow_id: str | None = None
    stage_name: str | None = None
    node_id: str | None = None
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LogChunkView:
    """A piece of a job's output, in order by ``seq`` within its workflow."""

    seq: int
    time: float
    stage_name: str
    stream: str  # "stdout" or "stderr"
    data: str
    task_id: int | None = None


@dataclass(frozen=True)
class HoldView:
    """A hold on a node: no new work there, and per ``effect`` more."""

    id: int
    node_id: str
    effect: str  # cordon, evict, deprovision
    source: str  # admin, monitoring, provisioner
    reason: str
    placed_by: str
    placed_at: float


@dataclass(frozen=True)
class StageExplanation:
    """Why a stage is where it is (``fuzzball workflow why``).

    ``reason`` is a scheduling reason code (INSUFFICIENT_RESOURCES, BACKFILL_NO_FIT,
    NODE_ANNOTATIONS_MISMATCH, DEVICE_PLUGIN_FAILED, FAIR_SHARE, INFEASIBLE) or one of
    WAITING_ON_DEPENDENCY, STARTING, RUNNING, FINISHED, FAILED, CANCELED.
    """

    stage_name: str
    kind: str
    status: str
    reason: str
    message: str
    estimated_start: float | None = None


@dataclass(frozen=True)
class NodeView:
    """A registered compute node with its capacity, use and liveness."""

    id: str
    name: str
    status: str  # a NodeStatus: READY, OFFLINE, DEPROVISIONED
    cores: int
    memory: int
    devices: Mapping[str, int] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    used_cores: int = 0
    used_memory: int = 0
    used_devices: Mapping[str, int] = field(default_factory=dict)
    registered_at: float | None = None
    last_seen: float | None = None
    #: running work: "<workflow id>/<stage name>" of the caller's own, IN_USE for others'
    stages: tuple[str, ...] = ()
    holds: tuple[HoldView, ...] = ()
