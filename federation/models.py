"""Federate's own tables, in their own metadata and Alembic history (``migrations/`` here).

Federate keeps no copy of a workflow's state; the owning cluster has it. What it keeps is its
accounts and their tokens (the shared token store, :mod:`fuzzball_core.service.accounts`, over
these tables), per workflow it dispatched, the member cluster and the id that cluster gave
it, the members that joined by registration (``federate_clusters``; those of
``federate.clusters`` in the configuration are not stored), and the registrations of members
that left unreachable, still to be ended there (``federate_pending_registration_ends``).

Every table name starts with ``federate_`` and the history keeps its revision in
``federate_alembic_version``, so Federate can have a database of its own or share Orchestrate's:
neither history creates, alters or drops a table of the other. (Orchestrate's history still
holds the ``federated_workflows`` table its revision 0004 created and its 0006 dropped; that
name is Orchestrate's and is not reused here.)
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import JSON, Boolean, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

#: Federate's Alembic history (``fuzzball_core.store.database.migrate(engine, migrations=...)``)
MIGRATIONS = Path(__file__).resolve().parent / "migrations"

#: the table in which Federate's Alembic history records its revision
VERSION_TABLE = "federate_alembic_version"


class FederateBase(DeclarativeBase):
    """Declarative base of Federate's tables (a metadata apart from Orchestrate's)."""


class FederateAccount(FederateBase):
    """A Federate account: owns federated workflows and API tokens."""

    __tablename__ = "federate_accounts"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    is_admin: Mapped[bool] = mapped_column(Boolean, default=False)
    #: an AccountKind, set when it is created (Orchestrate's ``accounts.kind``)
    kind: Mapped[str] = mapped_column(String(16), default="user", server_default="user")
    created_at: Mapped[float] = mapped_column(Float)


class FederateApiToken(FederateBase):
    """A bearer token of a Federate account, stored only as its SHA-256 digest, valid until
    it expires or is revoked."""

    __tablename__ = "federate_api_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    account_id: Mapped[str] = mapped_column(ForeignKey("federate_accounts.id", ondelete="CASCADE"))
    token_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[float] = mapped_column(Float)
    expires_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    revoked_at: Mapped[float | None] = mapped_column(Float, nullable=True)


class FederatedWorkflow(FederateBase):
    """A workflow Federate dispatched: its federated id, owner, and where it runs."""

    __tablename__ = "federate_workflows"
    __table_args__ = (Index("ix_federate_workflows_cluster_remote", "cluster", "remote_id"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    account_id: Mapped[str] = mapped_column(ForeignKey("federate_accounts.id"), index=True)
    cluster: Mapped[str] = mapped_column(String(200))
    remote_id: Mapped[str] = mapped_column(String(200))
    name: Mapped[str] = mapped_column(String(300))
    created_at: Mapped[float] = mapped_column(Float)
    #: the file as submitted, kept so the workflow can be submitted again elsewhere when its
    #: member stops answering before any job started (failover, revision f0003)
    specification: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: the user who started it and their email, shown even while its member is unreachable
    user_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    email: Mapped[str | None] = mapped_column(String(320), nullable=True)
    #: the member's last answer: its status, and whether a job or service had started there
    #: (then it is never re-routed: work seen started is never moved)
    last_status: Mapped[str | None] = mapped_column(String(16), nullable=True)
    job_started: Mapped[bool] = mapped_column(Boolean, default=False, server_default="0")
    #: the re-route, at most one per workflow: the member it left, when, and why
    rerouted_from: Mapped[str | None] = mapped_column(String(200), nullable=True)
    rerouted_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    reroute_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: the id the member it left gave it, until that member answers again and is told to
    #: stop it there (a partitioned member may have run it meanwhile: see failover.py)
    stale_remote_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    #: when its owner (or an administrator) asked to stop it (revision f0008): from then on
    #: it is never re-routed
    stop_requested_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: the stop is still to be delivered to its member, which did not answer when it was
    #: asked (failover's turns deliver it once the member answers again)
    stop_pending: Mapped[bool] = mapped_column(Boolean, default=False, server_default="0")


class RegisteredCluster(FederateBase):
    """A member that joined by registration (``POST /v3/admin/cluster/registration``).

    ``token_sealed`` is the member's API token for Federate's account there, encrypted with
    the data directory's secret keys (:class:`~fuzzball_core.store.secret_box.SecretBox`), so
    a copy of the database alone does not reveal it.
    """

    __tablename__ = "federate_clusters"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    #: a ClusterKind name (``CLUSTER_KIND_ORCHESTRATE``, ``CLUSTER_KIND_FEDERATE``)
    kind: Mapped[str] = mapped_column(String(32))
    api_endpoint: Mapped[str] = mapped_column(String(1000))
    openapi_endpoint: Mapped[str] = mapped_column(String(1000), default="")
    token_sealed: Mapped[str] = mapped_column(Text)
    jwk_public_key: Mapped[str] = mapped_column(Text, default="")
    labels: Mapped[dict[str, str]] = mapped_column(JSON, default=dict)
    #: leaving: it gets no new work until its federated workflows have ended
    draining: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)


class FederateTrust(FederateBase):
    """A Federate this Federate accepts forwarded identities from, recorded when it generated
    a registration for it (this Federate a member of that one): its name and public key, and
    the account that registration made (the key is honoured only with a live token of that
    account, and goes when the registration ends or its tokens all lapse)."""

    __tablename__ = "federate_trusted_federates"

    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    public_jwk: Mapped[str] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Float)
    account_id: Mapped[str | None] = mapped_column(String(36), nullable=True)


class PendingRegistrationEnd(FederateBase):
    """A member that left while it could not be reached: its registration is still to be
    ended there (its token revoked, this Federate's key dropped), asked again by the poll
    loop until it answers (:meth:`~fuzzball_federation.registration.Registrations.
    retry_ends`). ``token_sealed`` as :class:`RegisteredCluster`'s."""

    __tablename__ = "federate_pending_registration_ends"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    cluster_id: Mapped[str] = mapped_column(String(64), index=True)
    name: Mapped[str] = mapped_column(String(200))
    api_endpoint: Mapped[str] = mapped_column(String(1000))
    token_sealed: Mapped[str] = mapped_column(Text)
    left_at: Mapped[float] = mapped_column(Float)
    #: tries since it left, the first (as it left) included
    attempts: Mapped[int] = mapped_column(Integer)
    next_attempt_at: Mapped[float] = mapped_column(Float)
    #: why the last try failed (the client's message: no token in it)
    last_error: Mapped[str] = mapped_column(Text)


class RoutingDecision(FederateBase):
    """Where the router sent a federated workflow and why (``routers/fit.py``): the chosen
    member, a one-line summary (the ``workflow_routed`` event's message and ``workflow why``'s
    first row) and, as JSON, each eligible member's estimate and each rejected one's reason."""

    __tablename__ = "federate_routing_decisions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    workflow_id: Mapped[str] = mapped_column(
        ForeignKey("federate_workflows.id", ondelete="CASCADE"), index=True
    )
    decided_at: Mapped[float] = mapped_column(Float)
    cluster: Mapped[str] = mapped_column(String(200))
    summary: Mapped[str] = mapped_column(Text)
    data: Mapped[dict[str, object]] = mapped_column(JSON, default=dict)
