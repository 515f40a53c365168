"""provisioner_instances: the instances the provisioning loop asked drivers for (issue 14)

Each row is one instance from request to deletion, so a restarted Orchestrate knows which
nodes it created, which it already deleted (never twice) and which never registered.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-03 12:40:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "provisioner_instances",
        sa.Column("id", sa.String(length=36), primary_key=True),
        sa.Column("name", sa.String(length=255), nullable=False, unique=True),
        sa.Column("definition_id", sa.String(length=63), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("driver_id", sa.String(length=255), nullable=False),
        sa.Column("token_digest", sa.String(length=64), nullable=False),
        sa.Column("annotations", sa.JSON(), nullable=False),
        sa.Column("ttl", sa.Float(), nullable=True),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("requested_at", sa.Float(), nullable=False),
        sa.Column("registered_at", sa.Float(), nullable=True),
        sa.Column("deprovision_requested_at", sa.Float(), nullable=True),
        sa.Column("deleted_at", sa.Float(), nullable=True),
        sa.Column("requested_for", sa.JSON(), nullable=False),
        sa.Column("history", sa.JSON(), nullable=False),
    )
    op.create_index(
        "ix_provisioner_instances_definition_id", "provisioner_instances", ["definition_id"]
    )
    op.create_index("ix_provisioner_instances_state", "provisioner_instances", ["state"])


def downgrade() -> None:
    op.drop_index("ix_provisioner_instances_state", "provisioner_instances")
    op.drop_index("ix_provisioner_instances_definition_id", "provisioner_instances")
    op.drop_table("provisioner_instances")
