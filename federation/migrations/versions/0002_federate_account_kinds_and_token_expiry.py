"""Federate's accounts' kind, and tokens that expire and can be revoked

Revision ID: f0002
Revises: f0001
Create Date: 2026-12-03 10:00:00.000000

The same columns as Orchestrate's revision 0010 gives its accounts and tokens, since both go
through one token store. An existing administrator gets kind ``admin``, every other account
``user``; each existing token is given the default lifetime (90 days) from its creation.
"""

import time

import sqlalchemy as sa
from alembic import op

revision = "f0002"
down_revision = "f0001"
branch_labels = None
depends_on = None

#: the default token lifetime when this revision was written (seconds)
DEFAULT_TOKEN_LIFETIME = 90 * 24 * 3600


def upgrade() -> None:
    # ALTER TABLE ... ADD COLUMN in place: batch mode's copy of federate_accounts would
    # cascade to every token on SQLite
    with op.batch_alter_table("federate_accounts", schema=None, recreate="never") as batch_op:
        batch_op.add_column(
            sa.Column("kind", sa.String(length=16), nullable=False, server_default="user")
        )
    with op.batch_alter_table("federate_api_tokens", schema=None, recreate="never") as batch_op:
        batch_op.add_column(sa.Column("expires_at", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("revoked_at", sa.Float(), nullable=True))
    accounts = sa.table("federate_accounts", sa.column("is_admin"), sa.column("kind"))
    op.execute(accounts.update().where(accounts.c.is_admin == sa.true()).values(kind="admin"))
    tokens = sa.table("federate_api_tokens", sa.column("created_at"), sa.column("expires_at"))
    op.execute(tokens.update().values(expires_at=tokens.c.created_at + DEFAULT_TOKEN_LIFETIME))


def downgrade() -> None:
    # the older schema cannot tell a revoked or expired token from a live one: drop them
    tokens = sa.table("federate_api_tokens", sa.column("expires_at"), sa.column("revoked_at"))
    op.execute(
        tokens.delete().where(
            sa.or_(tokens.c.revoked_at.is_not(None), tokens.c.expires_at <= time.time())
        )
    )
    with op.batch_alter_table("federate_api_tokens", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("revoked_at")
        batch_op.drop_column("expires_at")
    with op.batch_alter_table("federate_accounts", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("kind")
