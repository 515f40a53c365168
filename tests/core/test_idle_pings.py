"""A pooled PostgreSQL connection is pinged at checkout only after it sat idle.

``pool_pre_ping`` pinged every checkout: a round trip a transaction, one of the eight of a
node's arrival on Orchestrate's loop.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, text

from fuzzball_core.store import idle_pings
from fuzzball_core.store.database import connect


@pytest.fixture
def engine(postgresql_url: str) -> Iterator[Engine]:
    engine = connect(postgresql_url)
    yield engine
    engine.dispose()


def _count_pings(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    pings: list[Any] = []
    real = engine.dialect.do_ping

    def counted(dbapi_connection: Any) -> bool:
        pings.append(dbapi_connection)
        return real(dbapi_connection)

    monkeypatch.setattr(engine.dialect, "do_ping", counted)
    return pings


def _backend(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(connection.execute(text("SELECT pg_backend_pid()")).scalar_one())


def test_a_connection_handed_out_again_at_once_is_not_pinged(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    pings = _count_pings(engine, monkeypatch)
    backends = {_backend(engine) for _ in range(5)}
    assert len(backends) == 1  # the same pooled connection each time
    assert pings == []


def test_a_connection_idle_past_the_window_is_pinged(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    _backend(engine)
    pings = _count_pings(engine, monkeypatch)
    monkeypatch.setattr(idle_pings, "PING_IDLE", 0.0)
    _backend(engine)
    assert len(pings) == 1


def test_a_connection_dropped_while_idle_is_replaced_not_failed(
    engine: Engine, postgresql_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _backend(engine)
    admin = create_engine(
        postgresql_server.replace("postgresql://", "postgresql+psycopg://", 1),
        isolation_level="AUTOCOMMIT",
    )
    try:
        with admin.connect() as connection:
            connection.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": first})
    finally:
        admin.dispose()
    monkeypatch.setattr(idle_pings, "PING_IDLE", 0.0)  # as if it sat idle
    assert _backend(engine) != first
