"""While the PostgreSQL server is away (stopped, restarting), the API answers UNAVAILABLE as a
google.rpc.Status, never an internal error: found by the chaos rounds (bench/chaos.py, a
PostgreSQL restart), reduced here to the one request."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from chaos_parts import PrivatePostgres
from cluster import InProcessOrchestrate, cluster_config, free_port

pytestmark = [pytest.mark.root, pytest.mark.slow]


@pytest.fixture
def orchestrate_on_postgres(
    tmp_path: Path, chaos_postgres: PrivatePostgres
) -> Iterator[tuple[InProcessOrchestrate, str]]:
    name = f"outage_{uuid.uuid4().hex[:10]}"
    config = cluster_config(tmp_path, "http://127.0.0.1:9", grpc_port=free_port())
    config["database"] = {"url": chaos_postgres.create_database(name)}
    orchestrate = InProcessOrchestrate(config)
    token = orchestrate.call(
        lambda: orchestrate.service.create_account("outage-admin", admin=True)[1]
    )
    try:
        yield orchestrate, token
    finally:
        chaos_postgres.start()
        orchestrate.close()
        chaos_postgres.drop_database(name)


@pytest.mark.xfail(
    strict=True,
    reason="the REST gateway answers a database that cannot be reached with 500 INTERNAL"
    " (api/rest.py _error_middleware; store/database.py storage_error knows busy and full only)",
)
def test_listing_workflows_while_the_database_server_is_down_answers_unavailable(
    orchestrate_on_postgres: tuple[InProcessOrchestrate, str], chaos_postgres: PrivatePostgres
) -> None:
    orchestrate, token = orchestrate_on_postgres
    chaos_postgres.stop()

    answer = httpx.get(
        f"{orchestrate.rest_url}/v3/workflows", headers={"Authorization": f"Bearer {token}"}
    )

    assert (answer.status_code, answer.json()["code"]) == (503, 14)
