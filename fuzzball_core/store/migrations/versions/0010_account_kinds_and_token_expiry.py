"""accounts' kind, and tokens that expire and can be revoked

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03 10:00:00.000000

Hold rights came from an account's name: ``monitoring`` and ``provisioner`` placed holds as
themselves, other administrators as ``admin``. The kind is now a column set at creation; an
existing account gets the kind its name and ``is_admin`` gave it. Tokens issued before had
no end: each is given the default lifetime from its creation (``accounts.token-lifetime``'s
default, 90 days), so none stays valid forever.
"""

import time

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

#: the default token lifetime when this revision was written (seconds)
DEFAULT_TOKEN_LIFETIME = 90 * 24 * 3600


def upgrade() -> None:
    # ALTER TABLE ... ADD COLUMN in place, never batch mode's copy: on SQLite, dropping the
    # old accounts table would cascade to every token
    with op.batch_alter_table("accounts", schema=None, recreate="never") as batch_op:
        batch_op.add_column(
            sa.Column("kind", sa.String(length=16), nullable=False, server_default="user")
        )
    with op.batch_alter_table("api_tokens", schema=None, recreate="never") as batch_op:
        batch_op.add_column(sa.Column("expires_at", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("revoked_at", sa.Float(), nullable=True))
    accounts = sa.table("accounts", sa.column("name"), sa.column("is_admin"), sa.column("kind"))
    for service in ("monitoring", "provisioner"):
        op.execute(accounts.update().where(accounts.c.name == service).values(kind=service))
    op.execute(
        accounts.update()
        .where(accounts.c.is_admin == sa.true(), accounts.c.kind == "user")
        .values(kind="admin")
    )
    tokens = sa.table("api_tokens", sa.column("created_at"), sa.column("expires_at"))
    op.execute(tokens.update().values(expires_at=tokens.c.created_at + DEFAULT_TOKEN_LIFETIME))


def downgrade() -> None:
    # the older schema cannot tell a revoked or expired token from a live one: drop them
    tokens = sa.table("api_tokens", sa.column("expires_at"), sa.column("revoked_at"))
    op.execute(
        tokens.delete().where(
            sa.or_(tokens.c.revoked_at.is_not(None), tokens.c.expires_at <= time.time())
        )
    )
    with op.batch_alter_table("api_tokens", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("revoked_at")
        batch_op.drop_column("expires_at")
    with op.batch_alter_table("accounts", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("kind")
