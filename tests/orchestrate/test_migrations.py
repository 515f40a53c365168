"""Every schema change is an Alembic revision: an empty database goes to head and back."""

import re

import pytest
from sqlalchemy import func, insert, inspect, select
from sqlalchemy.exc import IntegrityError

from fuzzball_core.store.database import connect, downgrade, migrate
from fuzzball_core.store.models import Base


def test_empty_database_upgrades_to_head_with_every_table(database_url):
    engine = connect(database_url)
    migrate(engine)
    tables = set(inspect(engine).get_table_names())
    assert set(Base.metadata.tables) <= tables


def test_head_downgrades_to_an_empty_database(database_url):
    engine = connect(database_url)
    migrate(engine)
    downgrade(engine)
    assert set(inspect(engine).get_table_names()) <= {"alembic_version"}


def test_migrating_twice_is_harmless(database_url):
    engine = connect(database_url)
    migrate(engine)
    migrate(engine)
    assert "workflows" in inspect(engine).get_table_names()


# SQLite cannot reflect an index on an expression (0021's lower(email)): PostgreSQL compares it
@pytest.mark.filterwarnings("ignore:autogenerate skipping metadata-specified expression-based")
@pytest.mark.filterwarnings("ignore:Skipped unsupported reflection of expression-based index")
def test_models_match_the_migrations(database_url):
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    engine = connect(database_url)
    migrate(engine)
    with engine.connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    assert diff == []


def test_head_read_from_the_scripts_is_alembics_head():
    from alembic.script import ScriptDirectory

    from fuzzball_core.store.database import MIGRATIONS, _script_head, alembic_config

    scripts = ScriptDirectory.from_config(alembic_config(connect("sqlite://")))
    assert _script_head(MIGRATIONS) == scripts.get_current_head()


def test_database_behind_head_is_upgraded_although_head_is_read_without_alembic(database_url):
    engine = connect(database_url)
    migrate(engine, "0001")
    migrate(engine)
    tables = set(inspect(engine).get_table_names())
    assert set(Base.metadata.tables) <= tables


# -- 0020: account names within their organization ------------------------------------------

ORGANIZATION_A, ORGANIZATION_B = (f"{c * 8}-0000-0000-0000-{'0' * 12}" for c in "ab")


def _tables(*names: str):
    return [Base.metadata.tables[name] for name in names]


def _two_organizations_with_a_member_each(connection) -> None:
    """Organizations ``a`` and ``b``, user ``carol`` of ``a`` with her personal account, a
    token, a membership and a workflow, as revision 0019 held them."""
    organizations, users, accounts, members, tokens, workflows = _tables(
        "organizations", "users", "accounts", "account_members", "api_tokens", "workflows"
    )
    connection.execute(
        insert(organizations),
        [{"id": ORGANIZATION_A, "name": "a", "created_at": 0.0},
         {"id": ORGANIZATION_B, "name": "b", "created_at": 0.0}],
    )  # fmt: skip
    connection.execute(
        insert(users).values(
            id="u1", organization_id=ORGANIZATION_A, email="carol@a.test", role="OWNER",
            cluster_admin=False, require_password_update=False, failed_logins=0, created_at=0.0,
        )
    )  # fmt: skip
    connection.execute(
        insert(accounts).values(
            id="p1", name="carol@a.test", is_admin=False, kind="user",
            organization_id=ORGANIZATION_A, owner_user_id="u1", created_at=0.0,
        )
    )  # fmt: skip
    connection.execute(
        insert(members).values(
            account_id="p1", user_id="u1", relationship="ACCOUNT_OWNER", created_at=0.0
        )
    )
    connection.execute(
        insert(tokens).values(account_id="p1", token_sha256="0" * 64, created_at=0.0, user_id="u1")
    )
    connection.execute(
        insert(workflows).values(
            id="w1", account_id="p1", name="w", status="FINISHED", raw_specification="",
            definition_v4="", error="", created_at=0.0,
        )
    )  # fmt: skip


def test_0020_keeps_every_accounts_tokens_memberships_and_workflows(database_url):
    # SQLite copies the accounts table to drop its old constraint: with foreign keys on,
    # dropping the old copy would delete the tokens and memberships and refuse the workflows
    engine = connect(database_url)
    migrate(engine, "0019")
    with engine.begin() as connection:
        _two_organizations_with_a_member_each(connection)
    migrate(engine)
    with engine.connect() as connection:
        counts = [
            connection.execute(select(func.count()).select_from(table)).scalar()
            for table in _tables("accounts", "account_members", "api_tokens", "workflows")
        ]
    assert counts == [1, 1, 1, 1]


def _migrated_with_a_name_both_organizations_use(database_url):
    """A database migrated through 0020 with two organizations, whose second has a group
    named as the first's member's personal account (carol@a.test)."""
    engine = connect(database_url)
    migrate(engine, "0019")
    with engine.begin() as connection:
        _two_organizations_with_a_member_each(connection)
    migrate(engine)
    (accounts,) = _tables("accounts")
    with engine.begin() as connection:
        connection.execute(
            insert(accounts).values(
                id="g1", name="carol@a.test", is_admin=False, kind="group",
                organization_id=ORGANIZATION_B, created_at=0.0,
            )
        )  # fmt: skip
    return engine


def test_after_0020_another_organization_may_use_an_accounts_name(database_url):
    engine = _migrated_with_a_name_both_organizations_use(database_url)
    assert len(_names(engine, "carol@a.test")) == 2


def _names(engine, name: str) -> list[str]:
    (accounts,) = _tables("accounts")
    with engine.connect() as connection:
        return list(connection.execute(select(accounts.c.id).where(accounts.c.name == name)))


@pytest.mark.parametrize("organization", [ORGANIZATION_A, None])
def test_after_0020_a_name_is_still_unique_within_its_organization_and_the_cluster(
    database_url, organization
):
    engine = connect(database_url)
    migrate(engine)
    (organizations, accounts) = _tables("organizations", "accounts")
    row = {"name": "lab", "is_admin": False, "kind": "group", "created_at": 0.0}
    with engine.begin() as connection:
        connection.execute(
            insert(organizations).values(id=ORGANIZATION_A, name="a", created_at=0.0)
        )
        connection.execute(insert(accounts).values(id="g1", organization_id=organization, **row))
    with pytest.raises(IntegrityError), engine.begin() as connection:
        connection.execute(insert(accounts).values(id="g2", organization_id=organization, **row))


def test_downgrading_0020_refuses_while_two_organizations_share_a_name(database_url):
    engine = _migrated_with_a_name_both_organizations_use(database_url)
    with pytest.raises(RuntimeError, match=re.escape("'carol@a.test'; rename them first")):
        downgrade(engine, "0019")
    assert len(_names(engine, "carol@a.test")) == 2


# -- 0021: users' emails unique in any case ---------------------------------------------------


def _user(email: str, user_id: str) -> dict:
    return {
        "id": user_id, "organization_id": ORGANIZATION_A, "email": email, "role": "MEMBER",
        "cluster_admin": False, "require_password_update": False, "failed_logins": 0,
        "created_at": 0.0,
    }  # fmt: skip


def test_after_0021_an_email_differing_only_in_case_is_refused_by_the_store(database_url):
    engine = connect(database_url)
    migrate(engine)
    organizations, users = _tables("organizations", "users")
    with engine.begin() as connection:
        connection.execute(
            insert(organizations).values(id=ORGANIZATION_A, name="a", created_at=0.0)
        )
        connection.execute(insert(users).values(**_user("Ann@a.test", "u1")))
    with pytest.raises(IntegrityError), engine.begin() as connection:
        connection.execute(insert(users).values(**_user("ann@A.TEST", "u2")))


def test_0021_refuses_naming_the_emails_while_two_users_differ_only_in_case(database_url):
    engine = connect(database_url)
    migrate(engine, "0020")
    organizations, users = _tables("organizations", "users")
    with engine.begin() as connection:
        connection.execute(
            insert(organizations).values(id=ORGANIZATION_A, name="a", created_at=0.0)
        )
        connection.execute(insert(users), [_user("Ann@a.test", "u1"), _user("ann@a.test", "u2")])
    with pytest.raises(RuntimeError, match=re.escape("'ann@a.test' in different cases")):
        migrate(engine)
    with engine.connect() as connection:
        assert connection.execute(select(func.count()).select_from(users)).scalar() == 2


# -- 0022: central configuration revisions sealed ---------------------------------------------


def test_downgrading_0022_refuses_while_a_central_configuration_revision_is_sealed(database_url):
    engine = connect(database_url)
    migrate(engine)
    (revisions,) = _tables("central_config_revisions")
    with engine.begin() as connection:
        connection.execute(
            insert(revisions).values(
                revision=3, document="shown", document_sealed="gAAAA-sealed", created_at=0.0
            )
        )
    with pytest.raises(RuntimeError, match="central configuration revision 3 is sealed"):
        downgrade(engine, "0021")
    with engine.connect() as connection:
        assert connection.execute(select(revisions.c.document_sealed)).scalar() == "gAAAA-sealed"
