"""central_config_revisions: the central configuration (``/admin/centralconfig``), one row
per revision (issue 14: provisioner definitions added without a restart)

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-03 13:20:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "central_config_revisions",
        sa.Column("revision", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("document", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("central_config_revisions")
