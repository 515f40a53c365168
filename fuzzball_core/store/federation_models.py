"""Federate's own table: which member cluster runs each workflow submitted through it.

Federate keeps no copy of a workflow's state; the owning cluster has it. The row maps the id
Federate handed out to the cluster's name and the id that cluster gave the workflow.
"""

from __future__ import annotations

from sqlalchemy import Float, ForeignKey, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from fuzzball_core.store.models import Base


class FederatedWorkflow(Base):
    """A workflow Federate dispatched: its federated id, owner, and where it runs."""

    __tablename__ = "federated_workflows"
    __table_args__ = (Index("ix_federated_workflows_cluster_remote", "cluster", "remote_id"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    account_id: Mapped[str] = mapped_column(ForeignKey("accounts.id"), index=True)
    cluster: Mapped[str] = mapped_column(String(200))
    remote_id: Mapped[str] = mapped_column(String(200))
    name: Mapped[str] = mapped_column(String(300))
    created_at: Mapped[float] = mapped_column(Float)
