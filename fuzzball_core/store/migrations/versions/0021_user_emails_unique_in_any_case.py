"""a user's email is unique whatever its letters' case

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-07 06:00:00.000000

Signing in compares emails in lower case, and so does the check before a user is added or
renamed (``service/identity._email_free``), but ``users.email``'s unique constraint compared
them exactly: two requests adding ``Ann@lab.test`` and ``ann@lab.test`` at once could both
pass the check, and two users would then sign in with one email. ``uq_users_email_lower``, a
unique index on ``lower(email)``, makes the database refuse the second (answered as a
conflict by ``store.database.checked_write``).

The upgrade refuses, naming them, while two users' emails differ only in case; the downgrade
drops the index.
"""

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

_INDEX = "uq_users_email_lower"


def upgrade() -> None:
    users = sa.table("users", sa.column("email"))
    lowered = sa.func.lower(users.c.email)
    shared = (
        op.get_bind()
        .execute(sa.select(lowered).group_by(lowered).having(sa.func.count() > 1).order_by(lowered))
        .scalars()
        .all()
    )
    if shared:
        raise RuntimeError(
            "cannot make users' emails unique whatever their case: several users sign in"
            f" with {', '.join(repr(email) for email in shared[:20])} in different cases;"
            " change all but one of them first"
        )
    op.create_index(_INDEX, "users", [sa.text("lower(email)")], unique=True)


def downgrade() -> None:
    op.drop_index(_INDEX, "users")
