"""Schemathesis against a live gateway, from the OpenAPI document it serves: no request it
generates, valid or not, is answered with a server error (5xx), on any served route.

Each operation gets schemathesis' boundary cases (its coverage phase: every parameter and
field at and past its bounds) and ``FUZZBALL_SCHEMATHESIS_EXAMPLES`` generated examples per
generation mode (valid and invalid data; 25 by default, which fits in CI; set more to hunt), on
one stack that has a workflow and a node to find, so that the handlers behind the lookups run
too.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import httpx
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from support.live_api import HELLO, TASKS

EXAMPLES = int(os.environ.get("FUZZBALL_SCHEMATHESIS_EXAMPLES", "25"))


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
        send = _sender(stack.servers.rest_url, auth, server_errors)
        for case in _boundary_cases(schema, operation):
            send(case)
        for mode in schemathesis.GenerationMode:
            _fuzz(operation, mode, known, send)
    assert server_errors == []


def _sender(
    base_url: str, auth: dict[str, str], server_errors: list[str]
) -> Callable[[schemathesis.Case], None]:
    """Send a case; a 5xx answer is added to ``server_errors`` as ``METHOD PATH -> STATUS
    BODY``."""

    def send(case: schemathesis.Case) -> None:
        response = case.call(base_url=base_url, headers=auth, timeout=30)
        if response.status_code >= 500:
            server_errors.append(
                f"{case.method} {case.formatted_path} -> {response.status_code} "
                f"{response.text[:200]}"
            )

    return send


def _boundary_cases(
    schema: schemathesis.BaseSchema, operation: schemathesis.APIOperation
) -> list[schemathesis.Case]:
    """Schemathesis' coverage phase: each parameter and field at and just past its bounds
    (an int32 maximum and one more, a wrong type, a missing required value), valid and not."""
    config = schema.config.generation_for(operation=operation, phase="coverage")
    modes = list(schemathesis.GenerationMode)
    return list(
        schema.iter_coverage_cases(operation, generation_modes=modes, generation_config=config)
    )


def _fuzz(
    operation: schemathesis.APIOperation,
    mode: schemathesis.GenerationMode,
    known: list[str],
    send: Callable[[schemathesis.Case], None],
) -> None:
    """Send ``EXAMPLES`` generated requests of ``operation`` in ``mode``."""
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
    def generated(case: schemathesis.Case, real_id: str) -> None:
        if mode is schemathesis.GenerationMode.POSITIVE and "id" in (case.path_parameters or {}):
            case.path_parameters["id"] = real_id
        send(case)

    try:
        generated()
    except Unsatisfiable:
        # an operation with nothing a client can get wrong (no parameters, a body any JSON
        # object satisfies) has no invalid request to generate; valid ones were still sent
        if mode is not schemathesis.GenerationMode.NEGATIVE:
            raise
