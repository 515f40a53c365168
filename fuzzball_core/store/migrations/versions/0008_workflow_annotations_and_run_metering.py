"""workflows' annotations and the traffic each run's nodes metered

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03 09:00:00.000000

Both columns are nullable: rows written before this revision have neither.
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("workflows", schema=None) as batch_op:
        batch_op.add_column(sa.Column("annotations", sa.JSON(), nullable=True))
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("metering", sa.JSON(), nullable=True))


def downgrade() -> None:
    # ALTER TABLE ... DROP COLUMN (SQLite has it since 3.35), never batch mode's copy of the
    # table: on SQLite, dropping the old workflows table would cascade to every stage and run
    with op.batch_alter_table("runs", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("metering")
    with op.batch_alter_table("workflows", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("annotations")
