"""service endpoints (the endpoint proxy, persistent endpoints and takeover)

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03 12:00:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "service_endpoints",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("account_id", sa.String(length=36), nullable=False),
        sa.Column("organization_id", sa.String(length=36), nullable=True),
        sa.Column("owner_user_id", sa.String(length=36), nullable=True),
        sa.Column("persistent", sa.Boolean(), nullable=False),
        sa.Column("scope", sa.String(length=16), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("protocol", sa.String(length=8), nullable=False),
        sa.Column("strategy", sa.String(length=8), nullable=False),
        sa.Column("workflow_id", sa.String(length=36), nullable=True),
        sa.Column("service", sa.String(length=300), nullable=False),
        sa.Column("port", sa.Integer(), nullable=False),
        sa.Column("pending_workflow_id", sa.String(length=36), nullable=True),
        sa.Column("pending_service", sa.String(length=300), nullable=False),
        sa.Column("pending_port", sa.Integer(), nullable=False),
        sa.Column("retiring_workflow_id", sa.String(length=36), nullable=True),
        sa.Column("retire_at", sa.Float(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_service_endpoints_account_name", "service_endpoints", ["account_id", "name"]
    )
    op.create_index(
        "ix_service_endpoints_organization_id", "service_endpoints", ["organization_id"]
    )
    op.create_index("ix_service_endpoints_workflow_id", "service_endpoints", ["workflow_id"])


def downgrade() -> None:
    op.drop_table("service_endpoints")
