"""The tables of Orchestrate's store, one class per aggregate.

Times are seconds since the epoch (floats) so that SQLite and PostgreSQL store them alike.
Every change of state is written in one transaction together with its :class:`Event` row.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, BigInteger, Boolean, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    """Declarative base of every table."""


class Account(Base):
    """A user or service account; owns workflows and API tokens."""

    __tablename__ = "accounts"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    is_admin: Mapped[bool] = mapped_column(Boolean, default=False)
    #: an AccountKind (admin, monitoring, provisioner, user), set when it is created: what the
    #: account may do beyond its own workflows (never derived from its name)
    kind: Mapped[str] = mapped_column(String(16), default="user", server_default="user")
    created_at: Mapped[float] = mapped_column(Float)


class ApiToken(Base):
    """A bearer token, stored only as its SHA-256 digest, valid until it expires or is
    revoked."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    account_id: Mapped[str] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"))
    token_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[float] = mapped_column(Float)
    #: when it stops being accepted (None only for a token that never expires)
    expires_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: when it was revoked; a revoked token is never accepted again
    revoked_at: Mapped[float | None] = mapped_column(Float, nullable=True)


class Workflow(Base):
    """A submitted workflow: the file as sent, its v4 form, and its overall status."""

    __tablename__ = "workflows"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    account_id: Mapped[str] = mapped_column(ForeignKey("accounts.id"), index=True)
    name: Mapped[str] = mapped_column(String(300))
    status: Mapped[str] = mapped_column(String(16), index=True)
    raw_specification: Mapped[str] = mapped_column(Text)
    definition_v4: Mapped[str] = mapped_column(Text)
    error: Mapped[str] = mapped_column(Text, default="")
    #: the definition's top-level ``annotations`` (kept apart so a listing need not parse it)
    annotations: Mapped[dict[str, str] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[float] = mapped_column(Float)
    started_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    finished_at: Mapped[float | None] = mapped_column(Float, nullable=True)


class Stage(Base):
    """One stage of a workflow's plan (``jobs.NAME``, ``volumes.NAME``...).

    A task array is one stage; its tasks are :class:`Run` rows created as they are dispatched,
    and the counters here summarise them.
    """

    __tablename__ = "stages"
    __table_args__ = (Index("ix_stages_workflow_name", "workflow_id", "name", unique=True),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    workflow_id: Mapped[str] = mapped_column(ForeignKey("workflows.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(300))
    kind: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16))
    message: Mapped[str] = mapped_column(Text, default="")
    exit_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    node_ids: Mapped[list[str]] = mapped_column(JSON, default=list)
    attempt: Mapped[int] = mapped_column(Integer, default=1)
    task_count: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    next_task: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    tasks_finished: Mapped[int] = mapped_column(BigInteger, default=0)
    tasks_failed: Mapped[int] = mapped_column(BigInteger, default=0)
    tasks_running: Mapped[int] = mapped_column(BigInteger, default=0)
    created_at: Mapped[float] = mapped_column(Float)
    started_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    finished_at: Mapped[float | None] = mapped_column(Float, nullable=True)


class Run(Base):
    """One execution of a job (or of one task of an array) on its node(s).

    ``status`` is PENDING until placed, then ASSIGNED (sent to the node), STARTED (the
    container runs) and finally FINISHED, FAILED or CANCELED.
    """

    __tablename__ = "runs"
    __table_args__ = (Index("ix_runs_status", "status"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    workflow_id: Mapped[str] = mapped_column(ForeignKey("workflows.id", ondelete="CASCADE"))
    stage_id: Mapped[int] = mapped_column(ForeignKey("stages.id", ondelete="CASCADE"), index=True)
    task_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    attempt: Mapped[int] = mapped_column(Integer, default=1)
    status: Mapped[str] = mapped_column(String(16))
    node_ids: Mapped[list[str]] = mapped_column(JSON, default=list)
    #: nodes whose part of a multinode run already ended well (the run ends with the last)
    parts_done: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    #: the logical CPUs a pinned run holds on each of its nodes (node id -> CPU ids)
    cpus: Mapped[dict[str, list[int]] | None] = mapped_column(JSON, nullable=True)
    exit_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    message: Mapped[str] = mapped_column(Text, default="")
    #: why a failed run failed, as policy.retry.on spells it: "node" or the exit code
    failure_cause: Mapped[str | None] = mapped_column(String(16), nullable=True)
    #: traffic counters each node reported with the run's exit, by node id: {ingress_bytes,
    #: ingress_packets, egress_bytes, egress_packets} (keyed, so a report sent again after a
    #: reconnect replaces itself instead of counting twice)
    metering: Mapped[dict[str, dict[str, int]] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[float] = mapped_column(Float)
    assigned_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    started_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    finished_at: Mapped[float | None] = mapped_column(Float, nullable=True)


class Event(Base):
    """Something that happened, in order (``seq``)."""

    __tablename__ = "events"

    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    time: Mapped[float] = mapped_column(Float)
    kind: Mapped[str] = mapped_column(String(64))
    workflow_id: Mapped[str | None] = mapped_column(String(36), nullable=True, index=True)
    stage_name: Mapped[str | None] = mapped_column(String(300), nullable=True)
    node_id: Mapped[str | None] = mapped_column(String(36), nullable=True, index=True)
    message: Mapped[str] = mapped_column(Text, default="")
    data: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class LogChunk(Base):
    """A piece of a job's stdout or stderr."""

    __tablename__ = "log_chunks"
    __table_args__ = (
        Index("ix_log_chunks_workflow_stage", "workflow_id", "stage_name"),
        # a workflow's whole log is read in pages by seq
        Index("ix_log_chunks_workflow_seq", "workflow_id", "seq"),
    )

    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    time: Mapped[float] = mapped_column(Float)
    workflow_id: Mapped[str] = mapped_column(String(36))
    stage_name: Mapped[str] = mapped_column(String(300))
    task_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    stream: Mapped[str] = mapped_column(String(8))
    data: Mapped[str] = mapped_column(Text)


class LogUsage(Base):
    """How much output one run (``run_id``), or a whole workflow (``run_id`` 0), has had
    stored and how much was counted but dropped, past ``orchestrate.logs``' limits.

    ``marker_seq`` is the run's log line that says where its output was cut (rewritten as
    the dropped counts grow); ``mid_line`` says whether the last byte the run wrote, stored
    or not, ended a line.
    """

    __tablename__ = "log_usage"

    workflow_id: Mapped[str] = mapped_column(
        ForeignKey("workflows.id", ondelete="CASCADE"), primary_key=True
    )
    run_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    stored_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    dropped_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    dropped_lines: Mapped[int] = mapped_column(BigInteger, default=0)
    mid_line: Mapped[bool] = mapped_column(Boolean, default=False)
    #: the setting whose limit cut the output (``orchestrate.logs.max-bytes-per-job``)
    cut_by: Mapped[str] = mapped_column(String(64), default="")
    marker_seq: Mapped[int | None] = mapped_column(Integer, nullable=True)


class Node(Base):
    """A compute node known to Orchestrate, with the lease that says it is alive."""

    __tablename__ = "nodes"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    status: Mapped[str] = mapped_column(String(16))
    cores: Mapped[int] = mapped_column(Integer)
    memory: Mapped[int] = mapped_column(BigInteger)
    devices: Mapped[dict[str, int]] = mapped_column(JSON, default=dict)
    annotations: Mapped[dict[str, str]] = mapped_column(JSON, default=dict)
    #: the cores it can pin jobs to, as it registered them: [{id, socket, numa, threads}]
    cpu_topology: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON, nullable=True)
    registered_at: Mapped[float] = mapped_column(Float)
    last_seen: Mapped[float] = mapped_column(Float)
    lease_expires_at: Mapped[float] = mapped_column(Float)


class NodeHold(Base):
    """A hold on a node, kept alongside its status: no new work, and per ``effect`` more.

    ``effect`` is cordon (no new work), evict (running work is taken off too) or deprovision
    (the node is torn down once empty); ``source`` is admin, monitoring or provisioner.
    """

    __tablename__ = "node_holds"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    node_id: Mapped[str] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"), index=True)
    effect: Mapped[str] = mapped_column(String(16))
    source: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text, default="")
    placed_by: Mapped[str] = mapped_column(String(200))
    placed_at: Mapped[float] = mapped_column(Float)


class CachedObject(Base):
    """An image in the cluster's object cache (``fuzzball://SCOPE/NAME``).

    ``owner`` is the account id for the ``user`` scope and empty for ``group`` (the cluster
    has one group). The content lives under the data directory, named by ``digest``;
    ``definition_hash`` keys a workflow-built image to the definition it was built from.
    """

    __tablename__ = "cached_objects"
    __table_args__ = (
        Index("ix_cached_objects_owner_scope_name", "owner", "scope", "name", unique=True),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    owner: Mapped[str] = mapped_column(String(36))
    scope: Mapped[str] = mapped_column(String(16))
    name: Mapped[str] = mapped_column(String(300))
    digest: Mapped[str] = mapped_column(String(80))
    size: Mapped[int] = mapped_column(BigInteger)
    definition_hash: Mapped[str] = mapped_column(String(80), default="")
    created_at: Mapped[float] = mapped_column(Float)
    expires_at: Mapped[float | None] = mapped_column(Float, nullable=True)
