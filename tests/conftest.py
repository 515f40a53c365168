"""Suite-wide test configuration: which tests are slow, and a real database to test a store on.

``python3 -m pytest -m "not slow"`` is the edit-test loop (README): it leaves out whole-system
runs and the other tests that take more than a few seconds each. Files mark themselves with
``pytest.mark.slow`` where their owners chose to; the folders and files below are marked here
by path, so that the fast lane does not depend on every file remembering to.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

TESTS = Path(__file__).resolve().parent
START_POSTGRES = TESTS.parent / "scripts" / "start-postgres.sh"

#: Test folders and files (relative to tests/) whose every test is slow. tests/e2e: the
#: whole-system runs (Orchestrate, Substrates, containers, registries; seconds per test). The
#: files: more than 6 s each in `python3 -m pytest --durations=0` on the 2-core CI machine
#: (2026-12-03); measure again when a file grows or shrinks a lot.
SLOW_PATHS = (
    "e2e",
    "api/test_rest_gateway.py",
    "api/test_secrets_api.py",
    "api/test_submission_off_the_loop.py",
    "cli/test_node_hold_commands.py",
    "cli/test_remote_commands.py",
    "cli/test_secret_commands.py",
    "images/test_blob_download.py",
    "orchestrate/test_engine.py",
    "orchestrate/test_engine_holds.py",
    "orchestrate/test_engine_multinode.py",
    "orchestrate/test_engine_retries.py",
    "orchestrate/test_engine_services.py",
    "orchestrate/test_engine_why.py",
    "orchestrate/test_image_pull_stages.py",
    "orchestrate/test_run_secrets.py",
    "substrate/test_main.py",
)


def _is_slow(path: Path) -> bool:
    try:
        relative = path.resolve().relative_to(TESTS)
    except ValueError:
        return False
    return any(relative == Path(p) or Path(p) in relative.parents for p in SLOW_PATHS)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests under :data:`SLOW_PATHS` slow."""
    for item in items:
        if _is_slow(item.path):
            item.add_marker(pytest.mark.slow)


@functools.cache
def postgres_url() -> str:
    """The test server's URL: $FUZZBALL_TEST_POSTGRES_URL, or Debian's PostgreSQL started by
    scripts/start-postgres.sh when it is installed and we are root (as in CI); "" if none."""
    url = os.environ.get("FUZZBALL_TEST_POSTGRES_URL", "")
    if url or os.geteuid() != 0 or not shutil.which("pg_ctlcluster"):
        return url
    started = subprocess.run([str(START_POSTGRES)], capture_output=True, text=True)
    return started.stdout.strip() if started.returncode == 0 else ""


def postgres_database() -> Iterator[str]:
    """A new, empty database on the test server, dropped when the generator is closed."""
    server = postgres_url()
    if not server:
        pytest.skip(
            "no PostgreSQL server to test on: install Debian's postgresql and run as"
            " root, or set FUZZBALL_TEST_POSTGRES_URL"
        )
    name = f"fb_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(
        server.replace("postgresql://", "postgresql+psycopg://", 1), isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    base, _, _ = server.rpartition("/")
    try:
        yield f"{base}/{name}"
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database: an SQLite file, then a PostgreSQL database (skipped without one)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
        return
    yield from postgres_database()


@pytest.fixture
def postgresql_url() -> Iterator[str]:
    """An empty PostgreSQL database, for what only PostgreSQL has (skipped without one)."""
    yield from postgres_database()


@pytest.fixture
def postgresql_server(postgresql_url: str) -> str:
    """The test server's own database's URL (with :func:`postgresql_url`'s): to act on that
    database from outside it."""
    return postgres_url()
