"""What Orchestrate keeps on disk is its own user's only: the data directory 0700, the
database, its WAL and shared-memory files, the object cache's content 0600, from creation on.

Before, ``orchestrate.db`` and its WAL were 0644 in a 0755 directory, and another local user
read a workflow's env value out of the WAL.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from fuzzball_core.config import FuzzballConfig
from fuzzball_core.orchestrate.server import build
from fuzzball_core.store.database import connect, migrate, session_factory
from fuzzball_core.store.object_cache import CacheAddress, ObjectCache
from fuzzball_core.store.private_files import private_directory
from fuzzball_plugins.schedulers.default import DefaultScheduler


@pytest.fixture(autouse=True)
def usual_umask() -> Iterator[None]:
    """The umask most systems give a service (022): files are created readable by all unless
    the code that creates them says otherwise."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_database_directory_is_private(tmp_path):
    database = tmp_path / "data" / "orchestrate.db"
    connect(f"sqlite:///{database}").dispose()
    assert mode(database.parent) == 0o700


def test_a_new_database_and_its_wal_and_shm_are_the_owners_only(tmp_path):
    database = tmp_path / "orchestrate.db"
    engine = connect(f"sqlite:///{database}")
    migrate(engine)
    with engine.connect() as connection:  # WAL and shm exist while a connection is open
        connection.execute(text("SELECT count(*) FROM accounts"))
        files = [database, database.with_name("orchestrate.db-wal")]
        files.append(database.with_name("orchestrate.db-shm"))
        assert {path.name: mode(path) for path in files} == {path.name: 0o600 for path in files}
    engine.dispose()


def test_opening_a_store_never_changes_the_process_umask(tmp_path, monkeypatch):
    # the umask is the process's: under a private one, another thread's files made meanwhile
    # (a node agent's image unpacked in the same process) were private too, and a job's
    # non-root user could not run the image's programs
    changed: list[int] = []
    real_umask = os.umask

    def recorded(mask: int) -> int:
        changed.append(mask)
        return real_umask(mask)

    monkeypatch.setattr(os, "umask", recorded)
    database = tmp_path / "new" / "data" / "orchestrate.db"
    engine = connect(f"sqlite:///{database}")
    migrate(engine)
    with engine.connect() as connection:
        connection.execute(text("SELECT count(*) FROM accounts"))
    engine.dispose()
    private_directory(tmp_path / "private" / "dir")
    assert changed == []
    assert mode(database.parent) == mode(database.parent.parent) == 0o700


def test_a_database_an_older_version_left_readable_is_tightened_at_start(tmp_path):
    database = tmp_path / "orchestrate.db"
    engine = connect(f"sqlite:///{database}")
    migrate(engine)
    with engine.connect() as connection:
        connection.execute(text("SELECT count(*) FROM accounts"))
        wal = database.with_name("orchestrate.db-wal")
        for path in (database, wal):
            path.chmod(0o644)
        connect(f"sqlite:///{database}").dispose()
        assert (mode(database), mode(wal)) == (0o600, 0o600)
    engine.dispose()


def test_orchestrate_closes_a_data_directory_left_open(tmp_path):
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    data.chmod(0o755)
    build(FuzzballConfig(data_dir=data), DefaultScheduler())
    assert mode(data) == 0o700


def test_a_shared_sticky_directory_is_not_closed(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    private_directory(shared)
    assert mode(shared) == 0o1777


def test_the_object_caches_content_and_config_are_the_owners_only(tmp_path):
    engine = connect(f"sqlite:///{tmp_path / 'store.db'}")
    migrate(engine)
    cache = ObjectCache(session_factory(engine), tmp_path / "object-cache")
    config = cache.store_config({"Env": ["SECRET=1"]})
    held = cache.store(CacheAddress("a1", "user", "tools"), [b"image bytes"], config=config)
    blob = cache.blob_path(held.content)
    files = [blob, cache.config_path(config), cache.object_path(held.digest)]
    directories = [tmp_path / "object-cache", tmp_path / "object-cache" / "incoming"]
    directories += [f.parent for f in files]
    assert [mode(d) for d in directories] == [0o700] * 5
    assert [mode(f) for f in files] == [0o600] * 3
