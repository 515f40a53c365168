"""cluster_identity and trusted_federate_keys: this cluster's id in a federation and the
Federates trusted by registration (issue 17)

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-03 15:25:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "cluster_identity",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("created_at", sa.Float(), nullable=False),
    )
    op.create_table(
        "trusted_federate_keys",
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("public_jwk", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("trusted_federate_keys")
    op.drop_table("cluster_identity")
