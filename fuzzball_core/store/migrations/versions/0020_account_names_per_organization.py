"""accounts are named within their organization, not across the cluster

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-07 02:30:00.000000

``accounts.name`` was unique over the whole cluster: a user of one organization creating a
group named like another organization's group, or like another organization's user's email
(a personal account's name), was told that account existed. A name is now unique within its
organization (``uq_accounts_organization_name``); the cluster's own accounts, which have no
organization, stay unique among themselves (``uq_accounts_cluster_name``, a partial index:
a unique constraint treats every NULL organization as different).

SQLite cannot drop the constraint in place: the table is copied without it (batch mode's
recreate). Its foreign keys are off while migrations run (``migrations/env.py``), so the
copy's drop of the old table cascades to no token, membership or workflow.

The downgrade makes names unique across the cluster again; it refuses, naming them, while
two organizations use the same name.
"""

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

#: the name batch mode gives the unnamed unique constraint on ``name`` that 0001 made
#: (SQLite reflects it without a name; PostgreSQL named it ``accounts_name_key``)
_SQLITE_NAMES = {"uq": "uq_%(table_name)s_%(column_0_name)s"}
_OLD_SQLITE, _OLD_POSTGRESQL = "uq_accounts_name", "accounts_name_key"
_ORGANIZATION_NAME, _CLUSTER_NAME = "uq_accounts_organization_name", "uq_accounts_cluster_name"
_NO_ORGANIZATION = sa.text("organization_id IS NULL")


def _sqlite() -> bool:
    return op.get_bind().dialect.name == "sqlite"


def upgrade() -> None:
    if _sqlite():
        with op.batch_alter_table(
            "accounts", recreate="always", naming_convention=_SQLITE_NAMES
        ) as batch_op:
            batch_op.drop_constraint(_OLD_SQLITE, type_="unique")
            batch_op.create_unique_constraint(_ORGANIZATION_NAME, ["organization_id", "name"])
    else:
        op.drop_constraint(_OLD_POSTGRESQL, "accounts", type_="unique")
        op.create_unique_constraint(_ORGANIZATION_NAME, "accounts", ["organization_id", "name"])
    op.create_index(
        _CLUSTER_NAME,
        "accounts",
        ["name"],
        unique=True,
        sqlite_where=_NO_ORGANIZATION,
        postgresql_where=_NO_ORGANIZATION,
    )


def downgrade() -> None:
    accounts = sa.table("accounts", sa.column("name"))
    shared = (
        op.get_bind()
        .execute(
            sa.select(accounts.c.name)
            .group_by(accounts.c.name)
            .having(sa.func.count() > 1)
            .order_by(accounts.c.name)
        )
        .scalars()
        .all()
    )
    if shared:
        raise RuntimeError(
            "cannot make account names unique across the cluster: several organizations"
            f" have accounts named {', '.join(repr(name) for name in shared[:20])};"
            " rename them first"
        )
    op.drop_index(_CLUSTER_NAME, "accounts")
    if _sqlite():
        with op.batch_alter_table(
            "accounts", recreate="always", naming_convention=_SQLITE_NAMES
        ) as batch_op:
            batch_op.drop_constraint(_ORGANIZATION_NAME, type_="unique")
            batch_op.create_unique_constraint(_OLD_SQLITE, ["name"])
    else:
        op.drop_constraint(_ORGANIZATION_NAME, "accounts", type_="unique")
        op.create_unique_constraint(_OLD_POSTGRESQL, "accounts", ["name"])
