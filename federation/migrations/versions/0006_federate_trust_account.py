"""federate_trusted_federates.account_id: the federate account whose registration recorded
the key, so the key is dropped when that registration ends (the Federate leaving)

Keys recorded before are matched to the newest federate account their registration made
(named ``federate-{name}-{8 hex}``, as configuration:generate names it).

Revision ID: f0006
Revises: f0005
Create Date: 2026-12-05 22:10:00.000000
"""

import re

import sqlalchemy as sa
from alembic import op

revision = "f0006"
down_revision = "f0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("federate_trusted_federates") as batch:
        batch.add_column(sa.Column("account_id", sa.String(36), nullable=True))
    keys = sa.table("federate_trusted_federates", sa.column("name"), sa.column("account_id"))
    accounts = sa.table(
        "federate_accounts",
        sa.column("id"),
        sa.column("name"),
        sa.column("kind"),
        sa.column("created_at"),
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
    with op.batch_alter_table("federate_trusted_federates") as batch:
        batch.drop_column("account_id")
