"""Federate's tables: accounts, tokens, federated workflows

Revision ID: f0001
Revises:
Create Date: 2026-12-03 08:00:00.000000

Until this history existed Federate migrated its database with Orchestrate's, which left its
accounts in ``accounts``/``api_tokens`` and its workflows in ``federated_workflows``. A database
laid out that way (it has ``federated_workflows`` and no workflow of Orchestrate's) is a
Federate database from before: its rows are copied into the new tables, so its accounts' tokens
keep working. The old tables are left as they are.
"""

import sqlalchemy as sa
from alembic import op

revision = "f0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "federate_accounts",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("is_admin", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "federate_api_tokens",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("account_id", sa.String(length=36), nullable=False),
        sa.Column("token_sha256", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["account_id"], ["federate_accounts.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("token_sha256"),
    )
    op.create_table(
        "federate_workflows",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("account_id", sa.String(length=36), nullable=False),
        sa.Column("cluster", sa.String(length=200), nullable=False),
        sa.Column("remote_id", sa.String(length=200), nullable=False),
        sa.Column("name", sa.String(length=300), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["account_id"], ["federate_accounts.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("federate_workflows", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_federate_workflows_account_id"), ["account_id"], unique=False
        )
        batch_op.create_index(
            "ix_federate_workflows_cluster_remote", ["cluster", "remote_id"], unique=False
        )
    if _is_federate_database_from_before():
        _copy_from_before()


def _is_federate_database_from_before() -> bool:
    """``federated_workflows`` is there and Orchestrate never ran a workflow here.

    Orchestrate never wrote ``federated_workflows`` and Federate never wrote ``workflows``, so
    the pair tells a Federate database migrated with Orchestrate's history from an
    Orchestrate database that Federate now shares.
    """
    bind = op.get_bind()
    tables = set(sa.inspect(bind).get_table_names())
    if "federated_workflows" not in tables:
        return False
    if "workflows" not in tables:
        return True
    return bind.execute(sa.text("SELECT 1 FROM workflows LIMIT 1")).first() is None


def _copy_from_before() -> None:
    op.execute(
        "INSERT INTO federate_accounts (id, name, is_admin, created_at)"
        " SELECT id, name, is_admin, created_at FROM accounts"
    )
    op.execute(
        "INSERT INTO federate_api_tokens (account_id, token_sha256, created_at)"
        " SELECT account_id, token_sha256, created_at FROM api_tokens"
    )
    op.execute(
        "INSERT INTO federate_workflows (id, account_id, cluster, remote_id, name, created_at)"
        " SELECT id, account_id, cluster, remote_id, name, created_at FROM federated_workflows"
    )


def downgrade() -> None:
    with op.batch_alter_table("federate_workflows", schema=None) as batch_op:
        batch_op.drop_index("ix_federate_workflows_cluster_remote")
        batch_op.drop_index(batch_op.f("ix_federate_workflows_account_id"))
    op.drop_table("federate_workflows")
    op.drop_table("federate_api_tokens")
    op.drop_table("federate_accounts")
