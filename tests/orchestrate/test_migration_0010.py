"""Revision 0010 on a database that already holds accounts and tokens: the hold rights names
gave become kinds, every token gets the default lifetime from its creation, and down drops
only the new columns (and the tokens the old schema could not tell apart from live ones)."""

import time

import pytest
from sqlalchemy import inspect, text

from fuzzball_core.store.database import connect, downgrade, migrate

DAYS_90 = 90 * 24 * 3600
#: when the tokens were issued: lately, so that they are still valid when the test runs
ISSUED = time.time() - 10_000
ACCOUNTS = [
    ("a1", "alice", False),
    ("a2", "monitoring", False),
    ("a3", "provisioner", True),
    ("a4", "root", True),
]


@pytest.fixture
def before_0010(database_url):
    """A database at revision 0009 with four accounts, one token each."""
    engine = connect(database_url)
    migrate(engine, "0009")
    with engine.begin() as connection:
        for index, (account_id, name, admin) in enumerate(ACCOUNTS):
            connection.execute(
                text(
                    "INSERT INTO accounts (id, name, is_admin, created_at)"
                    " VALUES (:id, :name, :admin, 1)"
                ),
                {"id": account_id, "name": name, "admin": admin},
            )
            connection.execute(
                text(
                    "INSERT INTO api_tokens (account_id, token_sha256, created_at)"
                    " VALUES (:id, :digest, :created)"
                ),
                {"id": account_id, "digest": f"{index:064x}", "created": ISSUED + index},
            )
    return engine


def test_upgrading_gives_each_account_the_kind_its_name_and_admin_flag_gave_it(before_0010):
    migrate(before_0010, "0010")
    with before_0010.connect() as connection:
        kinds = dict(connection.execute(text("SELECT name, kind FROM accounts")).all())
    assert kinds == {
        "alice": "user",
        "monitoring": "monitoring",
        "provisioner": "provisioner",
        "root": "admin",
    }


def test_upgrading_gives_every_token_the_default_lifetime_from_its_creation(before_0010):
    migrate(before_0010, "0010")
    with before_0010.connect() as connection:
        rows = connection.execute(
            text("SELECT created_at, expires_at, revoked_at FROM api_tokens ORDER BY id")
        ).all()
    assert [tuple(row) for row in rows] == [
        (ISSUED + n, ISSUED + n + DAYS_90, None) for n in range(len(ACCOUNTS))
    ]


def test_downgrading_drops_the_columns_and_the_revoked_tokens(before_0010):
    migrate(before_0010, "0010")
    with before_0010.begin() as connection:
        connection.execute(text("UPDATE api_tokens SET revoked_at = 5 WHERE account_id = 'a1'"))
    downgrade(before_0010, "0009")
    assert "kind" not in {c["name"] for c in inspect(before_0010).get_columns("accounts")}
    token_columns = {c["name"] for c in inspect(before_0010).get_columns("api_tokens")}
    assert not {"expires_at", "revoked_at"} & token_columns
    with before_0010.connect() as connection:
        owners = connection.execute(text("SELECT account_id FROM api_tokens")).scalars().all()
    assert sorted(owners) == ["a2", "a3", "a4"]
