"""Routing decisions (``federate_routing_decisions``): where each federated workflow was sent
and why

Revision ID: f0005
Revises: f0004
Create Date: 2026-12-03 15:20:00.000000

The fit router's decision (chosen member, each eligible member's cost and start estimate,
each rejected member's reason) is kept per workflow, for its ``workflow_routed`` event and
``workflow why``; a re-routed workflow has a second one.
"""

import sqlalchemy as sa
from alembic import op

revision = "f0005"
down_revision = "f0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "federate_routing_decisions",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column(
            "workflow_id",
            sa.String(36),
            sa.ForeignKey("federate_workflows.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("decided_at", sa.Float(), nullable=False),
        sa.Column("cluster", sa.String(200), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
    )
    op.create_index(
        "ix_federate_routing_decisions_workflow_id",
        "federate_routing_decisions",
        ["workflow_id"],
    )


def downgrade() -> None:
    op.drop_index(
        "ix_federate_routing_decisions_workflow_id", table_name="federate_routing_decisions"
    )
    op.drop_table("federate_routing_decisions")
