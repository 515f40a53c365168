"""Revision 0008 (workflows' annotations, runs' metering) on a database that already holds
work: up keeps the rows and adds the columns empty, down drops only the columns."""

import pytest
from sqlalchemy import inspect, text

from fuzzball_core.store.database import connect, downgrade, migrate

ROWS = [
    "INSERT INTO accounts (id, name, is_admin, created_at) VALUES ('a1', 'alice', false, 1)",
    "INSERT INTO workflows (id, account_id, name, status, raw_specification, definition_v4,"
    " error, created_at) VALUES ('w1', 'a1', 'old', 'FINISHED', 'raw', 'v4', '', 1)",
    "INSERT INTO stages (workflow_id, name, kind, status, message, node_ids, attempt,"
    " tasks_finished, tasks_failed, tasks_running, created_at)"
    " VALUES ('w1', 'jobs.a', 'job', 'FINISHED', '', '[]', 1, 0, 0, 0, 1)",
    "INSERT INTO runs (workflow_id, stage_id, attempt, status, node_ids, message, created_at)"
    " SELECT 'w1', id, 1, 'FINISHED', '[]', '', 1 FROM stages",
]


@pytest.fixture
def before_0008(database_url):
    """A database at revision 0007 holding a finished workflow with a stage and a run."""
    engine = connect(database_url)
    migrate(engine, "0007")
    with engine.begin() as connection:
        for statement in ROWS:
            connection.execute(text(statement))
    return engine


def columns(engine, table: str) -> set[str]:
    return {column["name"] for column in inspect(engine).get_columns(table)}


def test_upgrading_adds_the_columns_empty_to_existing_rows(before_0008):
    migrate(before_0008, "0008")
    with before_0008.connect() as connection:
        annotations = connection.execute(text("SELECT annotations FROM workflows")).scalar_one()
        metering = connection.execute(text("SELECT metering FROM runs")).scalar_one()
    assert (annotations, metering) == (None, None)


def test_downgrading_drops_only_the_new_columns(before_0008):
    migrate(before_0008, "0008")
    downgrade(before_0008, "0007")
    assert "annotations" not in columns(before_0008, "workflows")
    assert "metering" not in columns(before_0008, "runs")
    with before_0008.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM runs")).scalar_one() == 1
