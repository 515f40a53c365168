"""The pool's ping before a PostgreSQL connection is handed out, only after it sat idle.

SQLAlchemy's ``pool_pre_ping`` pings every checkout: a round trip each transaction, one of
the eight a node's arrival costs (a flap's 5,000 nodes each arrive twice, one transaction
each, on the loop). A connection checked in less than :data:`PING_IDLE` seconds ago was
just working: the ping is what catches a connection the server dropped while it sat in the
pool (a restart, an idle timeout), and one that breaks within that second fails its
transaction as it would had it broken just after a ping. A failed ping discards the
connection and the pool connects anew, as ``pool_pre_ping`` does.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.exc import DisconnectionError

#: Seconds a pooled connection may sit idle and be handed out again unpinged.
PING_IDLE = 1.0
_CHECKED_IN = "fuzzball_checked_in"


def ping_when_idle(engine: Engine) -> None:
    """Ping ``engine``'s pooled connections at checkout when idle :data:`PING_IDLE` or
    longer (instead of ``pool_pre_ping``'s every checkout)."""
    dialect = engine.dialect

    def checked_in(_dbapi_connection: Any, record: Any) -> None:
        record.info[_CHECKED_IN] = time.monotonic()

    def checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        last = record.info.pop(_CHECKED_IN, None)
        if last is None or time.monotonic() - last < PING_IDLE:
            return  # new (it just connected), or working a moment ago
        try:
            dialect.do_ping(dbapi_connection)
        except dialect.loaded_dbapi.Error as exc:
            # the pool discards this connection and hands out a new one
            raise DisconnectionError("the pooled connection failed its ping") from exc

    event.listen(engine, "checkin", checked_in)
    event.listen(engine, "checkout", checkout)
