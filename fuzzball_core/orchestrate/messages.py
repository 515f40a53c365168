"""What the engine tells nodes, as plain values.

The engine decides *what* a node must do; :mod:`fuzzball_core.orchestrate.node_hub` turns
these into the node protocol's ``ControlMessage`` when it queues them on a node's stream, so
the engine's modules never build protobuf messages themselves.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Assign:
    """Run ``job_json`` as run ``run_id`` (every node of a multinode run gets the same)."""

    run_id: int
    workflow_id: str
    stage_name: str
    task_id: int | None
    job_json: str
    timeout_seconds: float
    node_ids: tuple[str, ...]
    volume_ingress_json: str
    #: the workflow's services placed now: (name, their node's address)
    hosts: tuple[tuple[str, str], ...] = ()
    #: a pinned run's logical CPUs on each of its nodes: (node id, CPU list such as "0-3")
    cpus: tuple[tuple[str, str], ...] = ()
    #: where each mounted volume lives: {volume: VolumeLocation JSON} as JSON text ("" none)
    volumes_json: str = ""
    #: the workflow's token when the job needs nothing else from ``RunSecrets`` ("": the
    #: run asks as it starts); never in a repr or log line
    workflow_token: str = field(default="", repr=False)
    #: who owns the workflow (:func:`workflow_owner`): the agent may give the job cgroups
    #: a job of the same owner left ("": only the same workflow's, as an older Orchestrate)
    owner: str = ""


@dataclass(frozen=True)
class Cancel:
    """Stop run ``run_id``; the node reports its exit as usual."""

    run_id: int
    reason: str


@dataclass(frozen=True)
class Shutdown:
    """The node is deprovisioned: its agent stops."""

    reason: str


@dataclass(frozen=True)
class RemoveVolume:
    """Delete volume ``volume_id``'s data on the node (``location_json``: its
    VolumeLocation as JSON text) and answer whether it is gone."""

    volume_id: str
    location_json: str


@dataclass(frozen=True)
class WorkflowEnded:
    """These workflows ended: the node removes their directories (per-workflow volumes,
    ingress markers) once no run of theirs is left on it."""

    workflow_ids: tuple[str, ...]


@dataclass
class LogsStored:
    """The node's output is stored: for each run id, every chunk up to this ``seq``
    (``LogData.seq``). Filled in while a pass applies reports, sent once it commits."""

    through_seq: dict[int, int]


#: Anything the engine sends to a node.
ToNode = Assign | Cancel | Shutdown | RemoveVolume | LogsStored | WorkflowEnded


def workflow_owner(account_id: str, user_id: str | None) -> str:
    """The owner of a workflow as its assignments name it: ``ACCOUNT_ID/USER_ID``, the
    account (whose organization it belongs to is fixed) and the user who submitted it
    (empty for an account's own token, which no user's submission shares). Jobs of one owner
    may reuse each other's cgroups on a node, so metering's counters never mix two
    owners'."""
    return f"{account_id}/{user_id or ''}"
