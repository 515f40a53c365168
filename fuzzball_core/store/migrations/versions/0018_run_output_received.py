"""runs.output_received: the last output chunk stored from each node of a run, so chunks an
agent sends again after a reconnect are stored once

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-04 09:00:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("output_received", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("output_received")
