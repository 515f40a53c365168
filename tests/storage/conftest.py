"""Fixtures of the storage tests: a migrated SQLite store ."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from fuzzball_core.store.database import connect, migrate, session_factory


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    """A session on a freshly migrated SQLite store."""
    engine = connect(f"sqlite:///{tmp_path / 'store.db'}")
    migrate(engine)
    with session_factory(engine)() as opened:
        yield opened
