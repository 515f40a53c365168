"""Federated workflows remember what failover needs: the file, the starter, the member's last
answer, and the one re-route

Revision ID: f0003
Revises: f0002
Create Date: 2026-12-03 15:00:00.000000

Rows from before this revision keep no file, so they are never re-routed (nothing to submit
again); their other new columns start empty (``job_started`` false).
"""

import sqlalchemy as sa
from alembic import op

revision = "f0003"
down_revision = "f0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("federate_workflows", schema=None, recreate="never") as batch_op:
        batch_op.add_column(sa.Column("specification", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("user_id", sa.String(length=36), nullable=True))
        batch_op.add_column(sa.Column("email", sa.String(length=320), nullable=True))
        batch_op.add_column(sa.Column("last_status", sa.String(length=16), nullable=True))
        batch_op.add_column(
            sa.Column("job_started", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch_op.add_column(sa.Column("rerouted_from", sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column("rerouted_at", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("reroute_reason", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("stale_remote_id", sa.String(length=200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("federate_workflows", schema=None) as batch_op:
        for column in (
            "stale_remote_id",
            "reroute_reason",
            "rerouted_at",
            "rerouted_from",
            "job_started",
            "last_status",
            "email",
            "user_id",
            "specification",
        ):
            batch_op.drop_column(column)
