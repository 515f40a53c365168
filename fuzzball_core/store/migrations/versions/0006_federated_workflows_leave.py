"""federated workflows leave Orchestrate's store

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03 08:00:00.000000

Federate keeps its workflows in its own history (``fuzzball_federation/migrations``, table
``federate_workflows``); the table 0004 created here was never written by Orchestrate. The
downgrade recreates it as 0004 left it.
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("federated_workflows", schema=None) as batch_op:
        batch_op.drop_index("ix_federated_workflows_cluster_remote")
        batch_op.drop_index(batch_op.f("ix_federated_workflows_account_id"))
    op.drop_table("federated_workflows")


def downgrade() -> None:
    op.create_table(
        "federated_workflows",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("account_id", sa.String(length=36), nullable=False),
        sa.Column("cluster", sa.String(length=200), nullable=False),
        sa.Column("remote_id", sa.String(length=200), nullable=False),
        sa.Column("name", sa.String(length=300), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["account_id"], ["accounts.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("federated_workflows", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_federated_workflows_account_id"), ["account_id"], unique=False
        )
        batch_op.create_index(
            "ix_federated_workflows_cluster_remote", ["cluster", "remote_id"], unique=False
        )
