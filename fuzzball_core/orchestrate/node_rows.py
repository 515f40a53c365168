"""The node rows a node list reads, kept between lists: on PostgreSQL only the rows changed
since the last list are read.

A node list shows every node, in name order, and at 5,000 nodes reading all their rows was
10-15 ms of the list worker's CPU (the driver's rows and their tuples) plus PostgreSQL's, its
wall 20-130 ms on loaded cores, though between two lists half a second apart most rows are as
they were (a row changes when its node registers, goes offline or is held, and when its lease
is written: every 15 s). PostgreSQL keeps a version of every row that every write renews, its
``xmin`` (the transaction that wrote that version), and each statement's snapshot says which
transactions it saw: every write it did not see has an ``xmin`` at or after the snapshot's
``xmin`` (the oldest transaction still running then). So :class:`NodeRows` remembers the
snapshot of the read before, and reads only the rows written at or after its ``xmin`` (a few
seen before among them: read again, no harm), with the number of rows in the same statement.
A node the rows kept do not hold, one renamed (the list's order is PostgreSQL's collation,
not Python's) or a number of rows unlike the kept ones' (a node deleted) makes it read every
row again, in order, as the first read does; so does a read too many transactions after the
last one for their ``xmin`` to compare (:data:`MOST_BEHIND`), and every other database.

A list that does not show when each node was last heard (the REST list's ``ListNodeInfo``,
which the list worker makes) reads :data:`UNHEARD_NODE`: ``last_seen`` as NULL, so a row whose
lease alone was written (a third of a large cluster's rows every lease) reads as it was, and
the list made of it stands.
"""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy import ClauseElement, Connection, Select, Text, cast, null, select

from fuzzball_core.store.models import Node

#: the node columns a node list reads, the JSON ones as their text: most nodes of a cluster
#: have the same devices and annotations (often none), and decoding two documents a node
#: cost a tenth of a list's CPU (the service's ``_listed_nodes`` decodes each text once)
LISTED_NODE = (
    Node.id,
    Node.name,
    Node.status,
    Node.cores,
    Node.memory,
    cast(Node.devices, Text),
    cast(Node.annotations, Text),
    Node.registered_at,
    Node.last_seen,
)
#: :data:`LISTED_NODE` with ``last_seen`` read as NULL, for a list that does not show it:
#: the lease written to a row (``nodes.persist_leases``) changes nothing such a list reads
UNHEARD_NODE = (*LISTED_NODE[:-1], null().label("last_seen"))
#: where a row's name is (the kept rows' order is the name's)
_NAME = 1

LISTED_NODES = select(*LISTED_NODE).order_by(Node.name)

#: transactions between two reads past which the rows are read whole: ``age`` compares 32-bit
#: transaction ids within 2^31 of the current one
MOST_BEHIND = 1 << 30
#: the current snapshot's oldest running transaction (a 64-bit ``xid8``), as text
_SNAPSHOT = "SELECT pg_snapshot_xmin(pg_current_snapshot())::text"


def _changed_rows_text(columns: str) -> str:
    """The statement of the rows written at or after transaction ``%(since)s`` (a 32-bit
    id), with the statement's snapshot and the number of rows, in one snapshot: a row of the
    snapshot and the count with no row's columns when no row changed."""
    table = Node.__tablename__
    return (
        "WITH snapshot AS (SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS xmin,"
        f" count(*) AS rows FROM {table})"
        " SELECT snapshot.xmin, snapshot.rows, changed.* FROM snapshot LEFT JOIN ("
        f"{columns} WHERE age({table}.xmin) <= age(CAST(%(since)s AS xid))"
        ") AS changed ON true"
    )


#: each dialect's text of the statements :func:`driver_rows` runs
_STATEMENT_TEXTS: dict[tuple[str, ClauseElement], str] = {}


def _text_of(connection: Connection, statement: ClauseElement) -> str:
    key = (connection.dialect.name, statement)
    text = _STATEMENT_TEXTS.get(key)
    if text is None:
        text = _STATEMENT_TEXTS[key] = str(statement.compile(dialect=connection.dialect))
    return text


def _fetched(connection: Connection, text: str, parameters: Any = None) -> list[tuple[Any, ...]]:
    """The rows of the statement ``text`` as the driver's tuples."""
    cursor = connection.connection.cursor()
    try:
        # no parameters passed as None: sqlite3 refuses it
        cursor.execute(text) if parameters is None else cursor.execute(text, parameters)
        return [tuple(row) for row in cursor.fetchall()]
    finally:
        cursor.close()


def driver_rows(connection: Connection, statement: ClauseElement) -> list[tuple[Any, ...]]:
    """The rows of ``statement`` (one without parameters, whose columns need no conversion
    from what the driver returns) as the driver's tuples, on the session's connection: a
    result's ``Row`` costs about 0.5 µs a row to make, and comparing two 5 µs (a tuple's
    0.5), where a node list compares each node's row with the last list's."""
    return _fetched(connection, _text_of(connection, statement))


class NodeRows:
    """The rows of ``columns`` (:data:`LISTED_NODE`, or :data:`UNHEARD_NODE`) in name order,
    read whole the first time and, on PostgreSQL, only those changed since after that (a row
    not read again is the same tuple as the read before returned)."""

    def __init__(self, columns: tuple[Any, ...] = LISTED_NODE) -> None:
        self._ordered: Select[Any] = select(*columns).order_by(Node.name)
        #: the columns without an order, for the changed rows' statement
        self._columns: Select[Any] = select(*columns)
        #: node id -> its row, in name order, as the last read left them, and the list of
        #: them that read returned
        self._rows: dict[str, tuple[Any, ...]] = {}
        self._listed: list[tuple[Any, ...]] = []
        #: the oldest transaction running when the last read's snapshot was taken (None:
        #: read every row next)
        self._since: int | None = None
        #: one read at a time: each starts from what the one before kept
        self._lock = threading.Lock()

    def read(self, connection: Connection) -> list[tuple[Any, ...]]:
        """Every node's row, in name order (on the session's ``connection``): on PostgreSQL
        the list the last read returned when no row was written since (not to be changed:
        a node list then finds what it made of the rows by the list's identity)."""
        if connection.dialect.name != "postgresql":
            return driver_rows(connection, self._ordered)
        with self._lock:
            since, kept = self._since, self._rows
            if since is not None:
                changed = self._changed(connection, since, kept)
                if changed is not None:
                    return changed
            return self._whole(connection)

    def _whole(self, connection: Connection) -> list[tuple[Any, ...]]:
        """Every row, read in order, after the snapshot the next read starts from."""
        # the snapshot first: a write the rows' statement sees or not has its xmin at or
        # after this snapshot's, so the next read reads it again
        ((since,),) = _fetched(connection, _SNAPSHOT)
        rows = driver_rows(connection, self._ordered)
        self._since, self._rows = int(since), {row[0]: row for row in rows}
        self._listed = rows
        return rows

    def _changed(
        self, connection: Connection, since: int, kept: dict[str, tuple[Any, ...]]
    ) -> list[tuple[Any, ...]] | None:
        """Every row, the kept ones but for those written since the last read; None when
        they must be read whole (a node new, renamed or deleted; too long since)."""
        text = _STATEMENT_TEXTS.get(("changed", self._columns))
        if text is None:
            text = _changed_rows_text(_text_of(connection, self._columns))
            _STATEMENT_TEXTS["changed", self._columns] = text
        fetched = _fetched(connection, text, {"since": str(since % (1 << 32))})
        snapshot, count = int(fetched[0][0]), fetched[0][1]
        if snapshot - since >= MOST_BEHIND or count != len(kept):
            return None
        rows = dict(kept)
        written = False
        for changed in fetched:
            row = changed[2:]
            if row[0] is None:  # the snapshot's row alone: no row changed
                continue
            before = rows.get(row[0])
            if before is None or before[_NAME] != row[_NAME]:
                return None  # a new node, or a new name: the order is the database's
            if before != row:
                rows[row[0]] = row
                written = True
        self._since = snapshot
        if written:
            self._rows, self._listed = rows, list(rows.values())
        return self._listed
