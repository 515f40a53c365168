"""The tables of Orchestrate's store, one class per aggregate.

Times are seconds since the epoch (floats) so that SQLite and PostgreSQL store them alike.
Every change of state is written in one transaction together with its :class:`Event` row.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    """Declarative base of every table."""


class Account(Base):
    """A user or service account; owns workflows and API tokens."""

    __tablename__ = "accounts"
    __table_args__ = (
        # an organization's accounts (groups, and personal accounts named after their user's
        # email) are named within it: another organization may use the same name, and its
        # own names tell nothing of the others'
        UniqueConstraint("organization_id", "name", name="uq_accounts_organization_name"),
        # the cluster's own accounts (service accounts: no organization) are named within
        # the cluster, which a unique constraint over a NULL organization would not hold
        Index(
            "uq_accounts_cluster_name",
            "name",
            unique=True,
            sqlite_where=text("organization_id IS NULL"),
            postgresql_where=text("organization_id IS NULL"),
        ),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    is_admin: Mapped[bool] = mapped_column(Boolean, default=False)
    #: an AccountKind (admin, monitoring, provisioner, user), set when it is created: what the
    #: account may do beyond its own workflows (never derived from its name)
    kind: Mapped[str] = mapped_column(String(16), default="user", server_default="user")
    created_at: Mapped[float] = mapped_column(Float)
    #: the organization it belongs to (None: a cluster service account, or an account made
    #: before organizations existed)
    # (no foreign keys on the columns added to accounts and api_tokens: SQLite adds them only
    # by copying the table, and dropping the old copy would cascade to every token)
    organization_id: Mapped[str | None] = mapped_column(String(36), nullable=True, index=True)
    #: the user whose personal account this is (kind ``user``)
    owner_user_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    #: for the account kept for a Federate's caller (one per caller a Federate forwards:
    #: ``service/forwarded_accounts``), the Federate's own account here, which sees its
    #: workflows; None for every other account
    federate_account_id: Mapped[str | None] = mapped_column(String(36), nullable=True, index=True)
    #: for the account kept for a Federate's caller of an organization there, the group it
    #: shares with that organization's other callers
    #: (:attr:`~fuzzball_core.service.forwarded_identity.ForwardedCaller.group_id`): the owner
    #: of its ``fuzzball://group/...`` images; None for every other account
    federate_group_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    updated_at: Mapped[float | None] = mapped_column(Float, nullable=True)


class Organization(Base):
    """A tenant: its users, accounts, secrets and workflows are invisible to every other."""

    __tablename__ = "organizations"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float | None] = mapped_column(Float, nullable=True)


class User(Base):
    """A person who signs in: a member of one organization, with a password (an argon2 hash)
    or an external identity, and the state of their failed logins."""

    __tablename__ = "users"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    organization_id: Mapped[str] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), index=True
    )
    #: the sign-in name (unique across the cluster, whatever its letters' case)
    email: Mapped[str] = mapped_column(String(320), unique=True)
    name: Mapped[str] = mapped_column(String(200), default="")
    #: an OrganizationRole
    role: Mapped[str] = mapped_column(String(32))
    cluster_admin: Mapped[bool] = mapped_column(Boolean, default=False)
    password_hash: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: the user must choose a new password at the next sign-in
    require_password_update: Mapped[bool] = mapped_column(Boolean, default=False)
    #: ``issuer|subject`` of an external identity provider's user, if they sign in there
    external_identity: Mapped[str | None] = mapped_column(String(500), nullable=True)
    #: failed sign-ins since the last good one; five lock the user out
    failed_logins: Mapped[int] = mapped_column(Integer, default=0)
    locked_until: Mapped[float | None] = mapped_column(Float, nullable=True)
    last_login_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float | None] = mapped_column(Float, nullable=True)


# signing in compares emails in any case, and so does the store: otherwise two users added at
# once as Ann@ and ann@ would both pass the check and sign in with one email (migration 0021)
Index("uq_users_email_lower", func.lower(User.email), unique=True)


class AccountMember(Base):
    """A user's membership of an account: owner or member of a personal or group account."""

    __tablename__ = "account_members"

    account_id: Mapped[str] = mapped_column(
        ForeignKey("accounts.id", ondelete="CASCADE"), primary_key=True
    )
    user_id: Mapped[str] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    #: an AccountRelationship
    relationship: Mapped[str] = mapped_column(String(32))
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
    #: the user acting in the account with it (None: a service account's token)
    user_id: Mapped[str | None] = mapped_column(String(36), nullable=True, index=True)
    #: a CredentialKind: ``api`` (account-scoped) or ``workflow`` (a running workflow's own)
    credential: Mapped[str] = mapped_column(String(16), default="api", server_default="api")
    #: the workflow whose token this is (credential ``workflow``); revoked when it ends
    workflow_id: Mapped[str | None] = mapped_column(String(36), nullable=True, index=True)


class Workflow(Base):
    """A submitted workflow: the file as sent, its v4 form, and its overall status."""

    __tablename__ = "workflows"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    account_id: Mapped[str] = mapped_column(ForeignKey("accounts.id"), index=True)
    #: the user who submitted it (None: an account's own token, or before revision 0013);
    #: whose ``secret://user/...`` references it resolves
    user_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
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
    #: the last output chunk (``LogData.seq``) stored from each node, by node id: an agent
    #: sends unacknowledged chunks again after a reconnect, and these are stored once
    output_received: Mapped[dict[str, int] | None] = mapped_column(JSON, nullable=True)
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

    ``owner`` is the account id for the ``user`` scope and the organization id for ``group``
    (for an account of no organization its own id, or its Federate organization's group:
    ``ObjectCache.group_of``; empty in entries stored before migration 0024). ``digest`` is
    the image object's (content and config, :mod:`fuzzball_core.image_objects`; the
    content's own digest in an entry from before image objects, until its first lookup);
    the content, config and object document live under the data directory, named by their
    digests; ``size`` is the content's. ``definition_hash`` keys a workflow-built image to
    the definition it was built from.
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


class OidcGrant(Base):
    """What the OIDC issuer keeps between requests: a refresh token (by digest) or a pending
    device authorization (device code by digest, and the user code a person types)."""

    __tablename__ = "oidc_grants"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    #: ``refresh`` or ``device``
    grant: Mapped[str] = mapped_column(String(16))
    #: SHA-256 of the refresh token or of the device code
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    #: the code a person enters on the approval page (device grants)
    user_code: Mapped[str | None] = mapped_column(String(16), nullable=True, index=True)
    #: the user it is for (a device grant has one once approved)
    user_id: Mapped[str | None] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), nullable=True
    )
    client_id: Mapped[str] = mapped_column(String(100))
    scope: Mapped[str] = mapped_column(String(500), default="")
    created_at: Mapped[float] = mapped_column(Float)
    expires_at: Mapped[float] = mapped_column(Float)
    approved_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    denied_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: when it was used up (a device code exchanged) or revoked (a refresh token rotated)
    consumed_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: when the device flow's client last polled (for ``slow_down``)
    last_polled_at: Mapped[float | None] = mapped_column(Float, nullable=True)


class Secret(Base):
    """A secret: its public parts in the clear (``info``: usernames, trusted domains,
    region...) and its value encrypted with the cluster's secret key (``ciphertext``).

    ``owner_id`` is the user (scope user), account (account, group), organization
    (organization) it belongs to, or ``cluster``.
    """

    __tablename__ = "secrets"
    __table_args__ = (
        Index("ix_secrets_scope_owner_name", "scope", "owner_id", "name", unique=True),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    organization_id: Mapped[str | None] = mapped_column(
        ForeignKey("organizations.id", ondelete="CASCADE"), nullable=True, index=True
    )
    #: a SecretScope
    scope: Mapped[str] = mapped_column(String(32))
    owner_id: Mapped[str] = mapped_column(String(36))
    name: Mapped[str] = mapped_column(String(200))
    #: a SecretType
    type: Mapped[str] = mapped_column(String(32))
    private: Mapped[bool] = mapped_column(Boolean, default=False)
    info: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    ciphertext: Mapped[str] = mapped_column(Text)
    created_by: Mapped[str | None] = mapped_column(String(36), nullable=True)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)


class AuditEntry(Base):
    """One line of the audit log: who did what to what, when, and how it went."""

    __tablename__ = "audit_log"

    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[float] = mapped_column(Float, index=True)
    #: an AuditAction
    action: Mapped[str] = mapped_column(String(40), index=True)
    #: ``ok``, ``denied`` or ``failed``
    outcome: Mapped[str] = mapped_column(String(16), default="ok")
    organization_id: Mapped[str | None] = mapped_column(String(36), nullable=True, index=True)
    #: who acted: a user's email, an account's name, ``workflow <id>``, or the name tried
    actor: Mapped[str] = mapped_column(String(320), default="")
    actor_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    #: what it was done to (a user, secret, node, organization: kind and id or name)
    target: Mapped[str] = mapped_column(String(500), default="")
    #: where the request came from (the client's address), when known
    source: Mapped[str] = mapped_column(String(100), default="")
    detail: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class ServiceEndpoint(Base):
    """A service endpoint: the URL ``/endpoints/{id}/`` (or ``{id}.<domain>``) and what it
    proxies to.

    A workflow's own endpoint lives as long as the workflow; a persistent one
    (``fuzzball endpoint create NAME``) outlives it and is attached to whichever workflow
    claimed it last. ``pending_*`` is a workflow that claimed it with the ``ready``
    strategy and has not become ready yet; ``retiring_workflow_id`` the one it took over,
    stopped at ``retire_at`` once requests in flight had time to finish.
    """

    __tablename__ = "service_endpoints"
    __table_args__ = (Index("ix_service_endpoints_account_name", "account_id", "name"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    name: Mapped[str] = mapped_column(String(63))
    account_id: Mapped[str] = mapped_column(String(36))
    organization_id: Mapped[str | None] = mapped_column(String(36), nullable=True, index=True)
    #: the user who created it (or whose workflow declared it); None for a service account
    owner_user_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    persistent: Mapped[bool] = mapped_column(Boolean, default=False)
    #: user, group, organization or public
    scope: Mapped[str] = mapped_column(String(16), default="group")
    #: path or subdomain
    kind: Mapped[str] = mapped_column(String(16), default="path")
    #: http or https: how the proxy speaks to the service
    protocol: Mapped[str] = mapped_column(String(8), default="http")
    #: how a new workflow takes it over: start (at submission) or ready
    strategy: Mapped[str] = mapped_column(String(8), default="start")
    workflow_id: Mapped[str | None] = mapped_column(String(36), nullable=True, index=True)
    service: Mapped[str] = mapped_column(String(300), default="")
    port: Mapped[int] = mapped_column(Integer, default=0)
    pending_workflow_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    pending_service: Mapped[str] = mapped_column(String(300), default="")
    pending_port: Mapped[int] = mapped_column(Integer, default=0)
    retiring_workflow_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    retire_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)


class StorageDriverRow(Base):
    """A storage driver installed for the cluster (``/admin/drivers``): a builtin plugin of
    the ``fuzzball.storage_drivers`` group by name, or a site driver's ``DriverDefinition``
    (image, mounts, files) kept as the admin gave it."""

    __tablename__ = "storage_drivers"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    name: Mapped[str] = mapped_column(String(63), unique=True)
    #: the swagger's DriverDefinition, as given
    definition: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)


class StorageClass(Base):
    """A storage class (``/admin/storage-classes``): a driver and what volumes of it are
    (persistent or per workflow, kept on delete, shared between nodes, name format, how many
    per group). ``definition`` is the swagger's StorageClassDefinition as accepted."""

    __tablename__ = "storage_classes"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    name: Mapped[str] = mapped_column(String(63), unique=True)
    driver_id: Mapped[str] = mapped_column(ForeignKey("storage_drivers.id"), index=True)
    definition: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    #: a StorageClassStatus (STORAGE_CLASS_STATUS_READY or _DISABLED)
    status: Mapped[str] = mapped_column(String(40))
    persistent: Mapped[bool] = mapped_column(Boolean, default=False)
    retain_on_delete: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)


class Volume(Base):
    """A persistent volume: ``volume://SCOPE/CLASS/NAME`` of one owner (a user, or a group
    account) in one organization. Per-workflow volumes have no row: they live and die with
    their workflow. ``node_id`` is the node holding a node-local volume (set when a job
    first used it); ``deleted_at`` marks a volume deleted whose data its class retains."""

    __tablename__ = "volumes"
    __table_args__ = (
        Index("ix_volumes_owner_name", "organization_id", "scope", "owner_id", "class_id", "name"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    organization_id: Mapped[str] = mapped_column(String(36), index=True)
    class_id: Mapped[str] = mapped_column(ForeignKey("storage_classes.id"), index=True)
    #: ``user`` or ``group``
    scope: Mapped[str] = mapped_column(String(8))
    #: the user's id (scope user) or the group account's id (scope group)
    owner_id: Mapped[str] = mapped_column(String(36))
    #: the account it was created in (charged against the class's per-group limit)
    account_id: Mapped[str] = mapped_column(String(36), index=True)
    name: Mapped[str] = mapped_column(String(255))
    display_name: Mapped[str] = mapped_column(String(255), default="")
    description: Mapped[str] = mapped_column(Text, default="")
    #: a VolumeStatus (VOLUME_STATUS_ENABLED or _DISABLED)
    status: Mapped[str] = mapped_column(String(40))
    #: indexed: Orchestrate looks up the volumes a node holds as it is removed or deprovisioned
    node_id: Mapped[str | None] = mapped_column(String(255), nullable=True, index=True)
    size_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
    access_time: Mapped[float | None] = mapped_column(Float, nullable=True)
    deleted_at: Mapped[float | None] = mapped_column(Float, nullable=True)


class ProvisionerInstance(Base):
    """An instance the provisioning loop asked a driver for, from request to deletion.

    ``name`` is the node name it registers under: new for every instance (never an earlier
    one's). ``token_digest`` is the SHA-256 of its one-time registration token (the token
    itself is kept nowhere). ``history`` holds ``[time, event kind, message]`` entries.
    """

    __tablename__ = "provisioner_instances"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    definition_id: Mapped[str] = mapped_column(String(63), index=True)
    #: an InstanceState
    state: Mapped[str] = mapped_column(String(16), index=True)
    driver_id: Mapped[str] = mapped_column(String(255), default="")
    token_digest: Mapped[str] = mapped_column(String(64))
    annotations: Mapped[dict[str, str]] = mapped_column(JSON, default=dict)
    ttl: Mapped[float | None] = mapped_column(Float, nullable=True)
    detail: Mapped[str] = mapped_column(Text, default="")
    requested_at: Mapped[float] = mapped_column(Float)
    registered_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    deprovision_requested_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    deleted_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: the runs it was requested for
    requested_for: Mapped[list[str]] = mapped_column(JSON, default=list)
    history: Mapped[list[Any]] = mapped_column(JSON, default=list)


class CentralConfigRevision(Base):
    """One revision of the central configuration (``/admin/centralconfig``); the newest
    revision is in force.

    ``document`` is the YAML document as reads show it, its credentials redacted
    (:mod:`fuzzball_core.orchestrate.central_config_secrets`); ``document_sealed`` the
    document as it was set, encrypted with the data directory's secret keys
    (:class:`~fuzzball_core.store.secret_box.SecretBox`), so a copy of the database alone
    reveals no credential. A row written before migration 0022 has ``document_sealed`` NULL
    and ``document`` in the clear until Orchestrate's start seals it.
    """

    __tablename__ = "central_config_revisions"

    revision: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    document: Mapped[str] = mapped_column(Text)
    document_sealed: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[float] = mapped_column(Float)


class ClusterIdentity(Base):
    """This cluster's id as a federation knows it (one row, made by the first
    ``/admin/cluster/registration/configuration:generate``)."""

    __tablename__ = "cluster_identity"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    created_at: Mapped[float] = mapped_column(Float)


class TrustedFederateKey(Base):
    """A Federate whose forwarded identities this cluster accepts, recorded by a registration
    generated for it (beside ``orchestrate.trusted-federates`` of the configuration), on
    requests bearing a live token of the registration that last recorded it (its federate
    account), until that registration ends or its tokens all lapse."""

    __tablename__ = "trusted_federate_keys"

    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    public_jwk: Mapped[str] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Float)
    account_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
