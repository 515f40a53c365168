"""Members that joined by registration (``federate_clusters``), and the Federates this one
trusts as their member (``federate_trusted_federates``)

Revision ID: f0004
Revises: f0003
Create Date: 2026-12-03 14:50:00.000000

Until now every member came from ``federate.clusters`` in the configuration; a member that
registers (``POST /v3/admin/cluster/registration``) is kept here, its API token sealed with
the data directory's secret keys, so it stays a member across restarts.
"""

import sqlalchemy as sa
from alembic import op

revision = "f0004"
down_revision = "f0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "federate_clusters",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False, unique=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("api_endpoint", sa.String(1000), nullable=False),
        sa.Column("openapi_endpoint", sa.String(1000), nullable=False),
        sa.Column("token_sealed", sa.Text(), nullable=False),
        sa.Column("jwk_public_key", sa.Text(), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("draining", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
    )
    op.create_table(
        "federate_trusted_federates",
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("public_jwk", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("federate_trusted_federates")
    op.drop_table("federate_clusters")
