"""federate_pending_registration_ends: members that left while unreachable, whose
registration (the token they gave, the Federate's key they trust) is still to be ended there;
the poll loop asks them again until they answer

Revision ID: f0007
Revises: f0006
Create Date: 2026-12-06 01:20:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "f0007"
down_revision = "f0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "federate_pending_registration_ends",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("cluster_id", sa.String(64), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("api_endpoint", sa.String(1000), nullable=False),
        sa.Column("token_sealed", sa.Text(), nullable=False),
        sa.Column("left_at", sa.Float(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.Float(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=False),
    )
    op.create_index(
        "ix_federate_pending_registration_ends_cluster_id",
        "federate_pending_registration_ends",
        ["cluster_id"],
    )


def downgrade() -> None:
    op.drop_index(
        "ix_federate_pending_registration_ends_cluster_id",
        table_name="federate_pending_registration_ends",
    )
    op.drop_table("federate_pending_registration_ends")
