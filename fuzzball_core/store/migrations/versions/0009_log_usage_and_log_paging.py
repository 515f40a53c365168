"""the output each run and workflow has stored and dropped, and paging a workflow's log by seq

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03 09:00:00.000000

Runs that wrote output before this revision have no log_usage row: they start counting
from nothing, so a run already past a limit keeps what it has and is cut from then on.
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "log_usage",
        sa.Column("workflow_id", sa.String(length=36), nullable=False),
        sa.Column("run_id", sa.BigInteger(), nullable=False),
        sa.Column("stored_bytes", sa.BigInteger(), nullable=False),
        sa.Column("dropped_bytes", sa.BigInteger(), nullable=False),
        sa.Column("dropped_lines", sa.BigInteger(), nullable=False),
        sa.Column("mid_line", sa.Boolean(), nullable=False),
        sa.Column("cut_by", sa.String(length=64), nullable=False),
        sa.Column("marker_seq", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(["workflow_id"], ["workflows.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("workflow_id", "run_id"),
    )
    with op.batch_alter_table("log_chunks", schema=None) as batch_op:
        batch_op.create_index("ix_log_chunks_workflow_seq", ["workflow_id", "seq"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("log_chunks", schema=None, recreate="never") as batch_op:
        batch_op.drop_index("ix_log_chunks_workflow_seq")
    op.drop_table("log_usage")
