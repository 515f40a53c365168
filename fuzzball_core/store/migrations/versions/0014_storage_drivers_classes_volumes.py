"""storage drivers, storage classes and persistent volumes (storage issue, STO-A)

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03 12:40:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "storage_drivers",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("definition", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "storage_classes",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("driver_id", sa.String(length=36), nullable=False),
        sa.Column("definition", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=40), nullable=False),
        sa.Column("persistent", sa.Boolean(), nullable=False),
        sa.Column("retain_on_delete", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["driver_id"], ["storage_drivers.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_index("ix_storage_classes_driver_id", "storage_classes", ["driver_id"])
    op.create_table(
        "volumes",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("organization_id", sa.String(length=36), nullable=False),
        sa.Column("class_id", sa.String(length=36), nullable=False),
        sa.Column("scope", sa.String(length=8), nullable=False),
        sa.Column("owner_id", sa.String(length=36), nullable=False),
        sa.Column("account_id", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("display_name", sa.String(length=255), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=40), nullable=False),
        sa.Column("node_id", sa.String(length=255), nullable=True),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("access_time", sa.Float(), nullable=True),
        sa.Column("deleted_at", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(["class_id"], ["storage_classes.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_volumes_organization_id", "volumes", ["organization_id"])
    op.create_index("ix_volumes_class_id", "volumes", ["class_id"])
    op.create_index("ix_volumes_account_id", "volumes", ["account_id"])
    op.create_index(
        "ix_volumes_owner_name",
        "volumes",
        ["organization_id", "scope", "owner_id", "class_id", "name"],
    )


def downgrade() -> None:
    op.drop_table("volumes")
    op.drop_table("storage_classes")
    op.drop_table("storage_drivers")
