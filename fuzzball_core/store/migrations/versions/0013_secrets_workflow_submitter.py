"""workflows.user_id: the user who submitted a workflow (secrets part of the identity issue)

``secret://user/NAME`` in a workflow resolves to the secrets of the user who submitted it,
whichever account they submitted it in, so the workflow keeps who that was. Workflows made
before this revision have none; their ``user`` references resolve to their account's owner
(a personal account's user), as the secrets service reads it.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-03 12:10:00.000000
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("workflows") as batch:
        batch.add_column(sa.Column("user_id", sa.String(length=36), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("workflows") as batch:
        batch.drop_column("user_id")
