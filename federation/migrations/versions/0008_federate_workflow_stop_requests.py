"""Federated workflows remember a stop asked for while their member did not answer: when it
was asked (never re-routed after it) and whether it is still to be delivered

Revision ID: f0008
Revises: f0007
Create Date: 2026-12-07 06:00:00.000000

Rows from before this revision have no stop recorded (``stop_pending`` false).
"""

import sqlalchemy as sa
from alembic import op

revision = "f0008"
down_revision = "f0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("federate_workflows", schema=None, recreate="never") as batch_op:
        batch_op.add_column(sa.Column("stop_requested_at", sa.Float(), nullable=True))
        batch_op.add_column(
            sa.Column("stop_pending", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("federate_workflows", schema=None) as batch_op:
        for column in ("stop_pending", "stop_requested_at"):
            batch_op.drop_column(column)
