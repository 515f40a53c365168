"""While the PostgreSQL server is away (stopped, restarting), the API answers UNAVAILABLE as a
google.rpc.Status, never an internal error: found by the chaos rounds (bench/chaos.py, a
PostgreSQL restart: GET and POST /workflows answered 500 INTERNAL), reduced here to one
request of each transport."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest
from support.chaos_parts import PrivatePostgres
from support.cluster import InProcessOrchestrate, cluster_config, free_port

from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.api.v1 import client_pb2_grpc as pb_grpc

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


def test_listing_workflows_while_the_database_server_is_down_answers_unavailable(
    orchestrate_on_postgres: tuple[InProcessOrchestrate, str], chaos_postgres: PrivatePostgres
) -> None:
    orchestrate, token = orchestrate_on_postgres
    chaos_postgres.stop()

    answer = httpx.get(
        f"{orchestrate.rest_url}/v3/workflows", headers={"Authorization": f"Bearer {token}"}
    )

    assert (answer.status_code, answer.json()["code"]) == (503, 14)
    assert "database server cannot be reached" in answer.json()["message"]


def test_a_grpc_call_while_the_database_server_is_down_answers_unavailable(
    orchestrate_on_postgres: tuple[InProcessOrchestrate, str], chaos_postgres: PrivatePostgres
) -> None:
    orchestrate, token = orchestrate_on_postgres
    chaos_postgres.stop()

    with grpc.insecure_channel(orchestrate.config.orchestrate.grpc_listen) as channel:
        stub = pb_grpc.WorkflowServiceStub(channel)
        with pytest.raises(grpc.RpcError) as refused:
            stub.ListWorkflows(
                pb.ListWorkflowsRequest(), metadata=[("authorization", f"Bearer {token}")]
            )

    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE


def test_orchestrate_started_while_its_database_server_is_down_serves_once_it_is_back(
    tmp_path: Path, chaos_postgres: PrivatePostgres
) -> None:
    name = f"late_{uuid.uuid4().hex[:10]}"
    config = cluster_config(tmp_path, "http://127.0.0.1:9", grpc_port=free_port())
    config["database"] = {"url": chaos_postgres.create_database(name), "start-wait": "60s"}
    chaos_postgres.stop()
    # the server comes back while Orchestrate is already waiting for it
    comes_back = threading.Timer(2.0, chaos_postgres.start)
    comes_back.start()
    try:
        orchestrate = InProcessOrchestrate(config)
        try:
            token = orchestrate.call(
                lambda: orchestrate.service.create_account("late-admin", admin=True)[1]
            )
            answer = httpx.get(
                f"{orchestrate.rest_url}/v3/workflows",
                headers={"Authorization": f"Bearer {token}"},
            )
        finally:
            orchestrate.close()
    finally:
        comes_back.join()
        chaos_postgres.drop_database(name)

    assert answer.status_code == 200
