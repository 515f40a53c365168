"""Connecting to the store and bringing its schema to the current revision.

SQLite (the embedded default) runs in WAL mode with foreign keys on; PostgreSQL is reached
through psycopg 3 (``postgresql+psycopg://...``; a plain ``postgresql://`` URL is read the
same way). Migrations run automatically before a process serves anything.

An SQLite database holds every workflow's definition and env values, so its directory is made
0700 and the database, its WAL and its shared-memory file 0600 when they are created (SQLite
gives the WAL and shm files the database file's mode), and tightened when an older version
left them readable (:mod:`fuzzball_core.store.private_files`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from fuzzball_core.store.private_files import private_file, private_umask, tighten

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def normalise_url(url: str) -> str:
    """Pick the psycopg 3 driver for PostgreSQL URLs that name no driver."""
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    # NORMAL is durable across application crashes in WAL mode (only an OS crash can lose
    # the last transactions), which is the trade SQLite's documentation recommends.
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.close()


#: what SQLite keeps beside a database file ``X``: ``X-wal`` and ``X-shm`` in WAL mode,
#: ``X-journal`` while it rolls back
SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")


def _private_sqlite_files(database: Path) -> None:
    """Create the database's directory (0700 when new) and the database file (0600), and
    tighten the files an older version made readable by others."""
    with private_umask():
        database.parent.mkdir(parents=True, exist_ok=True)
    private_file(database)
    for suffix in SQLITE_COMPANIONS:
        tighten(database.with_name(database.name + suffix))


def _connect_privately(dialect: Any, _record: Any, cargs: Any, cparams: Any) -> Any:
    # A file SQLite creates while connecting is the service's own from its first byte.
    with private_umask():
        return dialect.connect(*cargs, **cparams)


def connect(url: str) -> Engine:
    """An SQLAlchemy engine for ``url``, with the per-dialect settings above."""
    url = normalise_url(url)
    if url.startswith("sqlite"):
        path = make_url(url).database
        if path and path != ":memory:":
            _private_sqlite_files(Path(path))
        engine = create_engine(url, connect_args={"check_same_thread": False})
        event.listen(engine, "do_connect", _connect_privately)
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(url, pool_pre_ping=True)


def alembic_config(engine: Engine, migrations: Path = MIGRATIONS) -> Config:
    """An Alembic configuration bound to ``engine`` (no alembic.ini needed).

    ``migrations`` is the history to run: Orchestrate's by default; Federate passes its own
    (``fuzzball_federation.migrations``, with its own version table).
    """
    config = Config()
    config.set_main_option("script_location", str(migrations))
    config.attributes["engine"] = engine
    return config


def migrate(engine: Engine, revision: str = "head", migrations: Path = MIGRATIONS) -> None:
    """Upgrade the schema of history ``migrations`` to ``revision`` (head by default)."""
    command.upgrade(alembic_config(engine, migrations), revision)


def downgrade(engine: Engine, revision: str = "base", migrations: Path = MIGRATIONS) -> None:
    """Downgrade the schema of history ``migrations`` to ``revision`` (empty by default)."""
    command.downgrade(alembic_config(engine, migrations), revision)


def session_factory(engine: Engine) -> sessionmaker[Session]:
    """Sessions that keep loaded objects usable after commit."""
    return sessionmaker(engine, expire_on_commit=False)
