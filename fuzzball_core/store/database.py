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

import ast
import errno
import re
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from fuzzball_core.backoff import Backoff
from fuzzball_core.errors import FuzzballError, ResourceExhausted, Unavailable
from fuzzball_core.store.private_files import make_private_dirs, private_file, tighten
from fuzzball_core.store.wal_checkpoints import BACKSTOP_PAGES, WalCheckpoints

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).resolve().parent / "migrations"

#: How a write refused because another writer holds the database is tried again, on top of
#: SQLite's own busy timeout (which does not cover a write whose read snapshot went stale:
#: SQLite answers that at once, and only a new transaction can succeed).
BUSY_RETRY = Backoff(initial=0.05, factor=4.0, maximum=1.0, attempts=3)
#: SQLite's primary result codes for a busy and for a full database, and PostgreSQL's
#: SQLSTATEs for lock waits, serialization failures, deadlocks and a full disk.
_SQLITE_BUSY = frozenset({5, 6})  # SQLITE_BUSY, SQLITE_LOCKED
_SQLITE_FULL = 13
_PG_BUSY = frozenset({"55P03", "40001", "40P01"})
_PG_FULL = "53100"
#: PostgreSQL's SQLSTATEs for a server going away: the connection-exception class (08...),
#: and an administrator's or a crash's shutdown and a server still starting (57P01-57P03).
_PG_GONE_CLASS = "08"
_PG_GONE = frozenset({"57P01", "57P02", "57P03"})
#: How long (ms) SQLite waits for another writer's lock before a write fails as busy.
BUSY_TIMEOUT_MS = 10_000
_BUSY_TEXT = ("database is locked", "database table is locked")
_FULL_TEXT = ("database or disk is full", "no space left on device", "disk full")
#: SQLite's extended result codes for a UNIQUE and a PRIMARY KEY constraint failing, and
#: PostgreSQL's SQLSTATE for a unique violation.
_SQLITE_UNIQUE = frozenset({2067, 1555})
_PG_UNIQUE = "23505"
#: How many times :func:`checked_write` runs its work when each run's write collides.
CHECKED_WRITE_ATTEMPTS = 3

T = TypeVar("T")


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
    # wait this long (ms) for another writer's lock before the write fails as busy
    cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    # checkpoints are the checkpoint thread's (wal_checkpoints): a commit runs one only
    # should the thread fall far behind
    cursor.execute(f"PRAGMA wal_autocheckpoint={BACKSTOP_PAGES}")
    cursor.close()


#: what SQLite keeps beside a database file ``X``: ``X-wal`` and ``X-shm`` in WAL mode,
#: ``X-journal`` while it rolls back
SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")


def _private_sqlite_files(database: Path) -> None:
    """Create the database's directory (0700 when new) and the database file (0600), and
    tighten the files an older version made readable by others.

    SQLite makes the WAL, shared-memory and journal files with the database file's own mode,
    so the 0600 file made here keeps them private from their first byte, with no umask
    changed around a connection (the umask is the process's: another thread's files made
    meanwhile would have been private too)."""
    make_private_dirs(database.parent)
    private_file(database)
    for suffix in SQLITE_COMPANIONS:
        tighten(database.with_name(database.name + suffix))


#: each SQLite engine's checkpoints (:func:`background_checkpoints`)
_BACKGROUND_CHECKPOINTS: weakref.WeakKeyDictionary[Engine, WalCheckpoints] = (
    weakref.WeakKeyDictionary()
)


def background_checkpoints(engine: Engine) -> WalCheckpoints | None:
    """The checkpoints the checkpoint thread runs for ``engine``'s SQLite file, None for
    another database."""
    return _BACKGROUND_CHECKPOINTS.get(engine)


def _checkpoint_in_background(engine: Engine, database: Path) -> None:
    """Have the checkpoint thread checkpoint ``database`` after ``engine``'s commits, until
    the engine is let go (:mod:`fuzzball_core.store.wal_checkpoints`)."""
    checkpoints = _BACKGROUND_CHECKPOINTS[engine] = WalCheckpoints(database)
    event.listen(engine, "commit", lambda _connection: checkpoints.committed())
    weakref.finalize(engine, checkpoints.close)


def connect(url: str) -> Engine:
    """An SQLAlchemy engine for ``url``, with the per-dialect settings above."""
    url = normalise_url(url)
    if url.startswith("sqlite"):
        path = make_url(url).database
        if path and path != ":memory:":
            _private_sqlite_files(Path(path))
        engine = create_engine(url, connect_args={"check_same_thread": False})
        event.listen(engine, "connect", _sqlite_pragmas)
        if path and path != ":memory:":
            _checkpoint_in_background(engine, Path(path))
        return engine
    return create_engine(url, pool_pre_ping=True)


def alembic_config(engine: Engine, migrations: Path = MIGRATIONS) -> Config:
    """An Alembic configuration bound to ``engine`` (no alembic.ini needed).

    ``migrations`` is the history to run: Orchestrate's by default; Federate passes its own
    (``fuzzball_federation.migrations``, with its own version table).
    """
    from alembic.config import Config  # imported only to migrate: a fifth of a start

    config = Config()
    config.set_main_option("script_location", str(migrations))
    config.attributes["engine"] = engine
    return config


#: a migration script's own ``revision = "0003"`` or ``down_revision = None`` line
_REVISION_LINE = re.compile(
    r"^(revision|down_revision)\s*(?::[^=\n]*)?=\s*(None|\"[^\"\n]*\"|'[^'\n]*')\s*$", re.M
)


def _script_head(migrations: Path) -> str | None:
    """The one head of the history ``migrations``, read from its scripts' text, or None when
    the text does not say it plainly (a merge, a branch, a revision not a literal): alembic
    then decides. Alembic's own answer imports alembic and every script, a fifth of a second
    of CPU at each of Orchestrate's starts."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for script in (migrations / "versions").glob("*.py"):
        if script.name.startswith(("__init__", ".#")):  # as alembic passes them over
            continue
        found = {match[1]: match[2] for match in _REVISION_LINE.finditer(script.read_text())}
        if set(found) != {"revision", "down_revision"}:
            return None
        revisions.add(ast.literal_eval(found["revision"]))
        parent = ast.literal_eval(found["down_revision"])
        if parent is not None:
            parents.add(parent)
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


def _at_head(engine: Engine) -> bool:
    """Whether Orchestrate's database is stamped with its history's one head already (its
    ``env.py`` keeps alembic's default version table)."""
    head = _script_head(MIGRATIONS)
    if head is None:
        return False
    try:
        with engine.connect() as connection:
            stamped = connection.execute(text("SELECT version_num FROM alembic_version")).all()
    except DBAPIError:  # no version table: a new database, which alembic creates
        return False
    return [row[0] for row in stamped] == [head]


def migrate(engine: Engine, revision: str = "head", migrations: Path = MIGRATIONS) -> None:
    """Upgrade the schema of history ``migrations`` to ``revision`` (head by default).

    Orchestrate's database already at the head (every start but the first after an upgrade)
    is left as it is without loading alembic."""
    if revision == "head" and migrations == MIGRATIONS and _at_head(engine):
        return
    from alembic import command

    command.upgrade(alembic_config(engine, migrations), revision)


def downgrade(engine: Engine, revision: str = "base", migrations: Path = MIGRATIONS) -> None:
    """Downgrade the schema of history ``migrations`` to ``revision`` (empty by default)."""
    from alembic import command

    command.downgrade(alembic_config(engine, migrations), revision)


def row_key(model: type, key: Any) -> tuple[Any, ...]:
    """A session's identity-map key of ``model``'s row with this (one-column) primary key,
    as ``Session.identity_key`` makes it: that inspects the class in every call (8 µs; the
    engine asks several a workflow in every pass)."""
    return (model, (key,), None)


def session_factory(engine: Engine) -> sessionmaker[Session]:
    """Sessions that keep loaded objects usable after commit."""
    return sessionmaker(engine, expire_on_commit=False)


def _driver_error(error: BaseException) -> BaseException:
    """The database driver's own exception under SQLAlchemy's wrapper."""
    return error.orig if isinstance(error, DBAPIError) and error.orig is not None else error


def is_busy(error: BaseException) -> bool:
    """Whether ``error`` is a write refused because another writer holds the database."""
    cause = _driver_error(error)
    code = getattr(cause, "sqlite_errorcode", None)
    if code is not None and code & 0xFF in _SQLITE_BUSY:
        return True
    if getattr(cause, "sqlstate", None) in _PG_BUSY:
        return True
    return any(text in str(cause).lower() for text in _BUSY_TEXT)


def is_full(error: BaseException) -> bool:
    """Whether ``error`` is a write that failed for want of disk space."""
    cause = _driver_error(error)
    code = getattr(cause, "sqlite_errorcode", None)
    if code is not None and code & 0xFF == _SQLITE_FULL:
        return True
    if getattr(cause, "sqlstate", None) == _PG_FULL:
        return True
    if isinstance(cause, OSError) and cause.errno == errno.ENOSPC:
        return True
    return any(text in str(cause).lower() for text in _FULL_TEXT)


def is_unreachable(error: BaseException) -> bool:
    """Whether ``error`` is the database server not answering (stopped, restarting, the
    connection cut), not the work's fault: the same request can succeed once it is back."""
    if isinstance(error, DBAPIError) and error.connection_invalidated:
        return True
    cause = _driver_error(error)
    state = getattr(cause, "sqlstate", None)
    if state is not None:
        return str(state).startswith(_PG_GONE_CLASS) or state in _PG_GONE
    # psycopg raises its OperationalError without a SQLSTATE when it cannot connect at all
    return type(cause).__name__ == "OperationalError" and type(cause).__module__.startswith(
        "psycopg"
    )


def unreachable_error(error: BaseException) -> Unavailable | None:
    """The answer for a client when the database server could not be reached: UNAVAILABLE
    (try again), never an internal error; None for any other failure."""
    if not is_unreachable(error):
        return None
    return Unavailable(
        "the database server cannot be reached (it may be restarting): nothing was changed;"
        " try again"
    )


def is_unique_violation(error: BaseException) -> bool:
    """Whether ``error`` is a write refused by a unique constraint (or a primary key)."""
    if not isinstance(error, IntegrityError):
        return False
    cause = _driver_error(error)
    code = getattr(cause, "sqlite_errorcode", None)
    if code is not None:
        return code in _SQLITE_UNIQUE
    return getattr(cause, "sqlstate", None) == _PG_UNIQUE


def checked_write(sessions: sessionmaker[Session], work: Callable[[Session], T]) -> T:
    """Run ``work`` in one transaction of ``sessions`` and commit it; its result.

    ``work`` checks that the names it writes are free and refuses (AlreadyExists...) when
    one is taken; a concurrent request can still write the same name between that check and
    this write, which the store's unique constraint then refuses. The work is run again in a
    new transaction, whose check sees the other request's row and answers as for any taken
    name, instead of the constraint's error escaping as an internal one. Nothing of a
    refused run is kept (its transaction is rolled back)."""
    attempts = 1
    while True:
        try:
            with sessions() as session, session.begin():
                return work(session)
        except IntegrityError as error:
            if attempts >= CHECKED_WRITE_ATTEMPTS or not is_unique_violation(error):
                raise
            attempts += 1


def is_store_failure(error: BaseException) -> bool:
    """Whether ``error`` is the store's (busy or full), not the work's: trying the same work
    again later can succeed."""
    return is_busy(error) or is_full(error)


#: how a starting process retries a database server that does not answer yet
START_RETRY = Backoff(initial=0.5, factor=2.0, maximum=5.0, jitter=0.2)


def _server_name(bind: Engine) -> str:
    """The database server as messages name it: host and port, never the URL's password."""
    url = bind.url
    return f"{url.host or 'localhost'}:{url.port or 5432}/{url.database or ''}"


def _reason(error: BaseException, bind: Engine) -> str:
    """The driver's one-line reason for ``error``, with the URL's password struck out should
    the driver ever repeat it."""
    reason = " ".join(str(_driver_error(error)).split())
    password = bind.url.password
    return reason.replace(str(password), "***") if password else reason


def wait_until_answering(
    bind: Engine,
    within: float,
    report: Callable[[str], None],
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Return once the store answers, retrying a server that cannot be reached (still
    starting, restarting, its network not up yet) for up to ``within`` seconds, as a service
    started beside its database must. Each failed try is ``report``ed with the next delay.
    Raises :class:`Unavailable` naming the server and the last reason once ``within`` has
    passed (at once when it is 0), and at once for a failure that waiting cannot cure."""
    deadline = clock() + within
    delays = START_RETRY.delays()
    while True:
        try:
            probe(bind)
            return
        except DBAPIError as error:
            reason = _reason(error, bind)
            delay = next(delays)
            if not is_unreachable(error) or clock() + delay > deadline:
                raise Unavailable(
                    f"the database server {_server_name(bind)} did not answer within"
                    f" {within:g} s (database.start-wait): {reason}"
                ) from None
            report(
                f"waiting for the database server {_server_name(bind)}: {reason};"
                f" trying again in {delay:.1f} s"
            )
            sleep(delay)


def data_location(bind: Engine) -> str:
    """Where the store keeps its data, for messages: an SQLite file's directory, else the
    database server."""
    url = bind.url
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        return f"the data directory {Path(url.database).resolve().parent}"
    return f"the database server {url.host or 'localhost'}'s disk"


def storage_error(error: BaseException, bind: Engine) -> FuzzballError | None:
    """The answer for a client when a write failed in the store: RESOURCE_EXHAUSTED naming
    where the data lives when the disk is full, UNAVAILABLE when the database stayed busy or
    its server cannot be reached; None for any other failure."""
    if is_full(error):
        return ResourceExhausted(
            f"{data_location(bind)} is full ({' '.join(str(_driver_error(error)).split())}):"
            " nothing was changed; free space there and try again (no restart is needed)"
        )
    if is_busy(error):
        return Unavailable(
            "the database is busy: another writer held it past the busy timeout and "
            f"{BUSY_RETRY.attempts} attempts; nothing was changed, try again"
        )
    return unreachable_error(error)


def probe(bind: Engine) -> str:
    """Check that the store answers (a ``SELECT 1``); say where it is. Raises when it does
    not answer: a readiness probe (:meth:`fuzzball_core.health.Health.probe`)."""
    with bind.connect() as connection:
        connection.exec_driver_sql("SELECT 1")
    return f"{bind.url.get_backend_name()} answers"
