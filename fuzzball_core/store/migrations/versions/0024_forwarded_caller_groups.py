"""accounts.federate_group_id: the group a Federate's caller shares fuzzball://group images in

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-07 10:00:00.000000

The object cache's ``group`` images are an organization's; an account of no organization (the
accounts kept for a Federate's callers, service accounts) had the group ``""``, one for all of
them, so a Federate's callers of different organizations read and overwrote each other's
``fuzzball://group/...`` images on a member. Now such an account's group is its own, and an
account kept for a Federate's caller of an organization there shares the group this column
names with that organization's other callers (``service/forwarded_accounts`` sets it on the
caller's next call). Existing accounts have none; images stored under the group ``""`` before
stay in the cache, addressed by nobody. The downgrade drops the column.
"""

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("accounts") as batch:
        batch.add_column(sa.Column("federate_group_id", sa.String(36), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("accounts") as batch:
        batch.drop_column("federate_group_id")
