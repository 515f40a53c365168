"""Federate's revision f0006 on a database whose registrations trusted Federates before it:
each key is matched to the newest federate account its registration made
(``federate-{name}-{8 hex}``), so the Federate leaving drops it as it drops a key recorded
since; a key no account matches stays unmatched (and is dropped at the member's next
start: ``forget_lapsed_keys``)."""

import pytest
from sqlalchemy import text

from fuzzball_core.store.database import connect, migrate
from fuzzball_federation.models import MIGRATIONS

ACCOUNTS = [
    # (id, name, kind, created_at)
    ("a1", "federate-hub-0a1b2c3d", "federate", 1.0),
    ("a2", "federate-hub-4e5f6a7b", "federate", 2.0),  # registered again: the newest
    ("a3", "federate-hub-extra-8c9d0e1f", "federate", 3.0),  # another Federate's
    ("a4", "federate-hub-9f8e7d6c", "user", 4.0),  # newest, but no federate account
]


@pytest.fixture
def before_f0006(database_url):
    """A Federate database at revision f0005 with registrations' accounts and two keys."""
    engine = connect(database_url)
    migrate(engine, "f0005", migrations=MIGRATIONS)
    with engine.begin() as connection:
        for account_id, name, kind, created in ACCOUNTS:
            connection.execute(
                text(
                    "INSERT INTO federate_accounts (id, name, is_admin, kind, created_at)"
                    " VALUES (:id, :name, false, :kind, :created)"
                ),
                {"id": account_id, "name": name, "kind": kind, "created": created},
            )
        for name in ("hub", "nobody"):
            connection.execute(
                text(
                    "INSERT INTO federate_trusted_federates (name, public_jwk, created_at)"
                    " VALUES (:name, '{}', 1)"
                ),
                {"name": name},
            )
    yield engine
    engine.dispose()


def test_upgrading_matches_each_key_to_the_newest_account_its_registration_made(before_f0006):
    migrate(before_f0006, "f0006", migrations=MIGRATIONS)
    with before_f0006.connect() as connection:
        matched = dict(
            connection.execute(
                text("SELECT name, account_id FROM federate_trusted_federates")
            ).all()
        )
    assert matched == {"hub": "a2", "nobody": None}
