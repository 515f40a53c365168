"""volumes.node_id indexed: Orchestrate looks up the volumes a node holds by node

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-07 13:00:00.000000

``volumes.held_on`` reads the node-local volumes whose only copy a node holds: in every pass
for each node under a deprovision hold (it stays up while it holds one), and before a node
is removed. Without an index each of those reads scanned the whole ``volumes`` table. The
downgrade drops the index.
"""

from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

_INDEX = "ix_volumes_node_id"


def upgrade() -> None:
    op.create_index(_INDEX, "volumes", ["node_id"])


def downgrade() -> None:
    op.drop_index(_INDEX, "volumes")
