"""Federate's store: its own tables and Alembic history, alone or in Orchestrate's database."""

from __future__ import annotations

import time

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Engine, inspect, text

from fuzzball_core.errors import Unauthenticated
from fuzzball_core.service.accounts import Accounts, token_digest
from fuzzball_core.store.database import connect, downgrade, migrate, session_factory
from fuzzball_core.store.models import Base
from fuzzball_federation.models import (
    MIGRATIONS,
    VERSION_TABLE,
    FederateAccount,
    FederateApiToken,
    FederateBase,
    FederatedWorkflow,
)

FEDERATE_TABLES = set(FederateBase.metadata.tables) | {VERSION_TABLE}


def _migrate_federate(engine: Engine) -> None:
    migrate(engine, migrations=MIGRATIONS)


def _federate_accounts(engine: Engine) -> Accounts:
    return Accounts(session_factory(engine), FederateAccount, FederateApiToken)


def _tables(engine: Engine) -> set[str]:
    return set(inspect(engine).get_table_names())


def test_an_empty_database_gets_only_federates_tables(database_url):
    engine = connect(database_url)
    _migrate_federate(engine)
    assert _tables(engine) == FEDERATE_TABLES


def test_federates_models_match_its_history(database_url):
    engine = connect(database_url)
    _migrate_federate(engine)
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
        assert compare_metadata(context, FederateBase.metadata) == []


def test_federates_history_downgrades_to_an_empty_database(database_url):
    engine = connect(database_url)
    _migrate_federate(engine)
    downgrade(engine, migrations=MIGRATIONS)
    assert _tables(engine) <= {VERSION_TABLE}


@pytest.mark.parametrize("first", ["orchestrate", "federate"])
def test_federate_and_orchestrate_share_a_database_migrated_in_either_order(database_url, first):
    engine = connect(database_url)
    histories = {
        "orchestrate": lambda: migrate(engine),
        "federate": lambda: _migrate_federate(engine),
    }
    for name in sorted(histories, key=lambda name: name != first):
        histories[name]()
    assert set(Base.metadata.tables) | FEDERATE_TABLES | {"alembic_version"} == _tables(engine)
    principal, token = _federate_accounts(engine).create("fed-admin", admin=True)
    assert _federate_accounts(engine).authenticate(token) == principal
    with pytest.raises(Unauthenticated):
        Accounts(session_factory(engine)).authenticate(token)  # not an Orchestrate token


def test_orchestrates_history_no_longer_keeps_federated_workflows(database_url):
    engine = connect(database_url)
    migrate(engine)
    assert "federated_workflows" not in _tables(engine)
    downgrade(engine, "0005")
    assert "federated_workflows" in _tables(engine)


def test_a_federate_database_from_before_keeps_its_accounts_tokens_and_workflows(database_url):
    # Until its own history existed, Federate migrated its database with Orchestrate's (to
    # 0005) and kept its rows in accounts, api_tokens and federated_workflows.
    engine = connect(database_url)
    migrate(engine, "0005")
    now = time.time()
    with engine.begin() as connection:
        connection.execute(
            text("INSERT INTO accounts VALUES ('a1', 'alice', :admin, :now)"),
            {"admin": False, "now": now},
        )
        connection.execute(
            text(
                "INSERT INTO api_tokens (account_id, token_sha256, created_at)"
                " VALUES ('a1', :digest, :now)"
            ),
            {"digest": token_digest("alices-token"), "now": now},
        )
        connection.execute(
            text("INSERT INTO federated_workflows VALUES ('w1', 'a1', 'aws', 'r1', 'hi', :now)"),
            {"now": now},
        )
    _migrate_federate(engine)
    assert _federate_accounts(engine).authenticate("alices-token").name == "alice"
    with session_factory(engine)() as session:
        row = session.get(FederatedWorkflow, "w1")
    assert (row.account_id, row.cluster, row.remote_id) == ("a1", "aws", "r1")


def test_orchestrates_accounts_are_not_taken_into_a_shared_database(database_url):
    engine = connect(database_url)
    migrate(engine)
    Accounts(session_factory(engine)).create("orchestrate-user")
    _migrate_federate(engine)
    with engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM federate_accounts")).scalar() == 0
