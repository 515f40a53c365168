"""organizations, users, account members, secrets, the OIDC issuer's grants, the audit log

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03 11:40:00.000000

Accounts made before this revision belong to no organization: service accounts stay so (they
are the cluster's), and user accounts keep working as they did (a member's permissions)
until an administrator moves them into an organization. Tokens issued before are API
tokens of no user.
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "organizations",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "users",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("organization_id", sa.String(length=36), nullable=False),
        sa.Column("email", sa.String(length=320), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("role", sa.String(length=32), nullable=False),
        sa.Column("cluster_admin", sa.Boolean(), nullable=False),
        sa.Column("password_hash", sa.Text(), nullable=True),
        sa.Column("require_password_update", sa.Boolean(), nullable=False),
        sa.Column("external_identity", sa.String(length=500), nullable=True),
        sa.Column("failed_logins", sa.Integer(), nullable=False),
        sa.Column("locked_until", sa.Float(), nullable=True),
        sa.Column("last_login_at", sa.Float(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("email"),
    )
    op.create_index("ix_users_organization_id", "users", ["organization_id"], unique=False)
    op.create_table(
        "account_members",
        sa.Column("account_id", sa.String(length=36), nullable=False),
        sa.Column("user_id", sa.String(length=36), nullable=False),
        sa.Column("relationship", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["account_id"], ["accounts.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("account_id", "user_id"),
    )
    op.create_index("ix_account_members_user_id", "account_members", ["user_id"], unique=False)
    op.create_table(
        "oidc_grants",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("grant", sa.String(length=16), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("user_code", sa.String(length=16), nullable=True),
        sa.Column("user_id", sa.String(length=36), nullable=True),
        sa.Column("client_id", sa.String(length=100), nullable=False),
        sa.Column("scope", sa.String(length=500), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.Column("approved_at", sa.Float(), nullable=True),
        sa.Column("denied_at", sa.Float(), nullable=True),
        sa.Column("consumed_at", sa.Float(), nullable=True),
        sa.Column("last_polled_at", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("digest"),
    )
    op.create_index("ix_oidc_grants_user_code", "oidc_grants", ["user_code"], unique=False)
    op.create_table(
        "secrets",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("organization_id", sa.String(length=36), nullable=True),
        sa.Column("scope", sa.String(length=32), nullable=False),
        sa.Column("owner_id", sa.String(length=36), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("type", sa.String(length=32), nullable=False),
        sa.Column("private", sa.Boolean(), nullable=False),
        sa.Column("info", sa.JSON(), nullable=False),
        sa.Column("ciphertext", sa.Text(), nullable=False),
        sa.Column("created_by", sa.String(length=36), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["organization_id"], ["organizations.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_secrets_organization_id", "secrets", ["organization_id"], unique=False)
    op.create_index(
        "ix_secrets_scope_owner_name", "secrets", ["scope", "owner_id", "name"], unique=True
    )
    op.create_table(
        "audit_log",
        sa.Column("seq", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("action", sa.String(length=40), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("organization_id", sa.String(length=36), nullable=True),
        sa.Column("actor", sa.String(length=320), nullable=False),
        sa.Column("actor_id", sa.String(length=36), nullable=True),
        sa.Column("target", sa.String(length=500), nullable=False),
        sa.Column("source", sa.String(length=100), nullable=False),
        sa.Column("detail", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("seq"),
    )
    op.create_index("ix_audit_log_at", "audit_log", ["at"], unique=False)
    op.create_index("ix_audit_log_action", "audit_log", ["action"], unique=False)
    op.create_index("ix_audit_log_organization_id", "audit_log", ["organization_id"], unique=False)
    # ALTER TABLE ... ADD COLUMN in place (recreate="never"): copying accounts on SQLite
    # would cascade the old table's drop to every token
    with op.batch_alter_table("accounts", schema=None, recreate="never") as batch_op:
        batch_op.add_column(sa.Column("organization_id", sa.String(length=36), nullable=True))
        batch_op.add_column(sa.Column("owner_user_id", sa.String(length=36), nullable=True))
        batch_op.add_column(sa.Column("updated_at", sa.Float(), nullable=True))
        batch_op.create_index("ix_accounts_organization_id", ["organization_id"], unique=False)
    with op.batch_alter_table("api_tokens", schema=None, recreate="never") as batch_op:
        batch_op.add_column(sa.Column("user_id", sa.String(length=36), nullable=True))
        batch_op.add_column(
            sa.Column("credential", sa.String(length=16), nullable=False, server_default="api")
        )
        batch_op.add_column(sa.Column("workflow_id", sa.String(length=36), nullable=True))
        batch_op.create_index("ix_api_tokens_user_id", ["user_id"], unique=False)
        batch_op.create_index("ix_api_tokens_workflow_id", ["workflow_id"], unique=False)


def downgrade() -> None:
    # the older schema knows no users: their tokens and accounts would be anyone's
    tokens = sa.table("api_tokens", sa.column("user_id"), sa.column("credential"))
    op.execute(
        tokens.delete().where(sa.or_(tokens.c.user_id.is_not(None), tokens.c.credential != "api"))
    )
    with op.batch_alter_table("api_tokens", schema=None, recreate="never") as batch_op:
        batch_op.drop_index("ix_api_tokens_workflow_id")
        batch_op.drop_index("ix_api_tokens_user_id")
        batch_op.drop_column("workflow_id")
        batch_op.drop_column("credential")
        batch_op.drop_column("user_id")
    with op.batch_alter_table("accounts", schema=None, recreate="never") as batch_op:
        batch_op.drop_index("ix_accounts_organization_id")
        batch_op.drop_column("updated_at")
        batch_op.drop_column("owner_user_id")
        batch_op.drop_column("organization_id")
    op.drop_table("audit_log")
    op.drop_table("secrets")
    op.drop_table("oidc_grants")
    op.drop_table("account_members")
    op.drop_table("users")
    op.drop_table("organizations")
