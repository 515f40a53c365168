"""Schemathesis against a live gateway, from the OpenAPI document it serves: no request it
generates, valid or not, is answered with a server error (5xx), on any served route.

Each operation gets ``FUZZBALL_SCHEMATHESIS_EXAMPLES`` examples per generation mode (valid and
invalid data; 25 by default, which fits in CI; ``bench`` runs and local hunts set more), on
one stack that has a workflow and a node to find, so that the handlers behind the lookups run
too.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from live_api import HELLO, TASKS, LoopThread, Stack, start_servers
from sql_stack import SqlStack

EXAMPLES = int(os.environ.get("FUZZBALL_SCHEMATHESIS_EXAMPLES", "25"))


@pytest.fixture(scope="module")
def module_stack(tmp_path_factory) -> Iterator[Stack]:
    loop = LoopThread()
    service = SqlStack(loop, tmp_path_factory.mktemp("fuzz") / "orchestrate.db")
    _, token = service.create_account("alice")
    _, other = service.create_account("bob")
    service.add_node("node-1", 8, 16 * 1024**3)
    servers = loop.run(start_servers(service.service))
    try:
        yield Stack(service, servers, loop, token, other)
    finally:
        loop.run(servers.close())
        service.close()
        loop.stop()


def test_no_served_route_answers_a_generated_request_with_a_server_error(module_stack):
    stack = module_stack
    known = [stack.start(HELLO, name="hello"), stack.start(TASKS, name="tasks")]
    auth = {"Authorization": f"Bearer {stack.token}"}
    document_url = f"{stack.servers.rest_url}/v3/openapi.json"
    served = httpx.get(document_url, headers=auth).json()["paths"]
    schema = schemathesis.openapi.from_url(document_url, headers=auth)
    operations = [result.ok() for result in schema.get_all_operations()]
    # every operation of the document, but the document's own URL, which schemathesis skips
    assert {operation.label for operation in operations} == {
        f"{method.upper()} {path}" for path, methods in served.items() for method in methods
    } - {"GET /v3/openapi.json"}
    server_errors: list[str] = []
    for operation in operations:
        for mode in schemathesis.GenerationMode:
            server_errors += _fuzz(stack.servers.rest_url, operation, mode, auth, known)
    assert server_errors == []


def _fuzz(
    base_url: str,
    operation: schemathesis.APIOperation,
    mode: schemathesis.GenerationMode,
    auth: dict[str, str],
    known: list[str],
) -> list[str]:
    """Send ``EXAMPLES`` generated requests of ``operation``; each one answered 5xx, as
    ``METHOD PATH -> STATUS BODY``."""
    found: list[str] = []
    # a generated id now and then is a real workflow's or node's, so lookups succeed too
    ids = st.one_of(st.sampled_from([*known, "node-1"]), st.text(min_size=1, max_size=40))

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(mode), real_id=ids)
    def send(case: schemathesis.Case, real_id: str) -> None:
        if mode is schemathesis.GenerationMode.POSITIVE and "id" in (case.path_parameters or {}):
            case.path_parameters["id"] = real_id
        response = case.call(base_url=base_url, headers=auth, timeout=30)
        if response.status_code >= 500:
            found.append(
                f"{case.method} {case.formatted_path} -> {response.status_code} "
                f"{response.text[:200]}"
            )

    send()
    return found
