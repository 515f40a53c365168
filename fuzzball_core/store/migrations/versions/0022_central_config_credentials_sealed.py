"""central configuration revisions keep their credentials sealed

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-07 08:00:00.000000

``central_config_revisions.document`` held each revision's document as it was set, cloud
credentials (``secret-access-key``, ``key-content``...) in the clear, and every read
returned it. ``document_sealed`` now holds the document as set, encrypted with the data
directory's secret keys, and ``document`` the document with its credentials redacted
(``fuzzball_core.orchestrate.central_config``). A migration cannot read the key file, so
the rows already there are sealed by Orchestrate's start (``CentralConfig.
seal_clear_revisions``), before it serves a read; until then ``document_sealed`` is NULL.

The downgrade refuses while a revision is sealed: the schema before it has nowhere to keep
the credentials, and dropping the column would lose them.
"""

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "central_config_revisions", sa.Column("document_sealed", sa.Text(), nullable=True)
    )


def downgrade() -> None:
    revisions = sa.table(
        "central_config_revisions", sa.column("revision"), sa.column("document_sealed")
    )
    sealed = (
        op.get_bind()
        .execute(
            sa.select(revisions.c.revision)
            .where(revisions.c.document_sealed.is_not(None))
            .order_by(revisions.c.revision)
        )
        .scalars()
        .all()
    )
    if sealed:
        several = len(sealed) > 1
        raise RuntimeError(
            f"cannot downgrade below 0022: central configuration revision{'s' if several else ''}"
            f" {', '.join(str(number) for number in sealed[:20])} {'are' if several else 'is'}"
            " sealed with the data directory's key file, which a migration cannot read, and the"
            " older schema keeps documents in the clear only; delete those revisions (losing"
            " them) first"
        )
    with op.batch_alter_table("central_config_revisions") as batch:
        batch.drop_column("document_sealed")
