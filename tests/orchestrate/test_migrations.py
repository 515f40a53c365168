"""Every schema change is an Alembic revision: an empty database goes to head and back."""

from sqlalchemy import inspect

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
