"""nodes' CPU topology and the CPUs pinned runs hold

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03 08:30:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("nodes", schema=None) as batch_op:
        batch_op.add_column(sa.Column("cpu_topology", sa.JSON(), nullable=True))
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("cpus", sa.JSON(), nullable=True))


def downgrade() -> None:
    # Drop the columns in place: on SQLite a batch "recreate" copies and drops the table, and
    # dropping `nodes` cascades to every node hold (ON DELETE CASCADE).
    with op.batch_alter_table("runs", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("cpus")
    with op.batch_alter_table("nodes", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("cpu_topology")
