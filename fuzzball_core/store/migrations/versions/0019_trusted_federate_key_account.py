"""trusted_federate_keys.account_id: the federate account whose registration recorded the
key, so the key is dropped when that registration ends (the Federate leaving)

Keys recorded before are matched to the newest federate account their registration made
(named ``federate-{name}-{8 hex}``, as configuration:generate names it).

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-05 22:10:00.000000
"""

import re

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("trusted_federate_keys") as batch:
        batch.add_column(sa.Column("account_id", sa.String(36), nullable=True))
    keys = sa.table("trusted_federate_keys", sa.column("name"), sa.column("account_id"))
    accounts = sa.table(
        "accounts", sa.column("id"), sa.column("name"), sa.column("kind"), sa.column("created_at")
    )
    connection = op.get_bind()
    names = [row.name for row in connection.execute(sa.select(keys.c.name))]
    federates = connection.execute(
        sa.select(accounts.c.id, accounts.c.name)
        .where(accounts.c.kind == "federate")
        .order_by(accounts.c.created_at)
    ).all()
    for name in names:
        made = re.compile(rf"federate-{re.escape(name)}-[0-9a-f]{{8}}")
        newest = [account.id for account in federates if made.fullmatch(account.name)]
        if newest:
            connection.execute(
                sa.update(keys).where(keys.c.name == name).values(account_id=newest[-1])
            )


def downgrade() -> None:
    with op.batch_alter_table("trusted_federate_keys") as batch:
        batch.drop_column("account_id")
