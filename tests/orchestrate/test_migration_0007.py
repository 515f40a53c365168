"""Revision 0007 (nodes' CPU topology, runs' pinned CPUs): down drops only the columns and keeps
the rows that hang off nodes (a batch recreate of `nodes` on SQLite cascaded to node holds)."""

from sqlalchemy import inspect, text

from fuzzball_core.store.database import connect, downgrade, migrate

NODE_WITH_HOLD = [
    "INSERT INTO nodes (id, name, status, cores, memory, devices, annotations, registered_at,"
    " last_seen, lease_expires_at) VALUES ('n1', 'node-1', 'READY', 4, 1024, '{}', '{}', 1, 1, 1)",
    "INSERT INTO node_holds (node_id, effect, source, reason, placed_by, placed_at)"
    " VALUES ('n1', 'cordon', 'admin', 'maintenance', 'alice', 1)",
]


def test_downgrading_0007_keeps_node_holds(database_url):
    engine = connect(database_url)
    migrate(engine, "0007")
    with engine.begin() as connection:
        for statement in NODE_WITH_HOLD:
            connection.execute(text(statement))
    downgrade(engine, "0006")
    assert "cpu_topology" not in {c["name"] for c in inspect(engine).get_columns("nodes")}
    with engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM node_holds")).scalar_one() == 1
