"""accounts.federate_account_id: the accounts kept for a Federate's callers

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-07 07:00:00.000000

A Federate's callers acted on a member in the Federate's own account, so every caller of the
Federate shared one namespace there (their ``volume://user/...`` volumes, secrets, endpoints
and workflows). A member now keeps an account per forwarded caller
(``service/forwarded_accounts``); this column names, on such an account, the Federate's own
account, which still sees its workflows (to follow and stop what it submitted). Existing
accounts have none; the downgrade drops the column (the accounts made for callers stay, as
accounts of no organization).
"""

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("accounts") as batch:
        batch.add_column(sa.Column("federate_account_id", sa.String(36), nullable=True))
        batch.create_index("ix_accounts_federate_account_id", ["federate_account_id"])


def downgrade() -> None:
    with op.batch_alter_table("accounts") as batch:
        batch.drop_index("ix_accounts_federate_account_id")
        batch.drop_column("federate_account_id")
