"""Schemathesis against a live gateway, from the OpenAPI document it serves: no request it
generates, valid or not, is answered with a server error (5xx), on any served route.

Each operation gets schemathesis' boundary cases (its coverage phase: every parameter and
field at and past its bounds) and ``FUZZBALL_SCHEMATHESIS_EXAMPLES`` generated examples per
generation mode (valid and invalid data; 25 by default, which fits in CI; set more to hunt), on
one stack that has a workflow and a node to find, so that the handlers behind the lookups run
too. The Web UI's routes (its forms' bodies among them) are fuzzed the same way on Orchestrate
as it serves (``IsolationStack``), signed in as the cluster administrator.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import httpx
import schemathesis
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from support.fuzz_runs import fuzz_settings
from support.isolation_stack import NODE_TOKEN, IsolationStack
from support.live_api import HELLO, TASKS, gateway_operations

from fuzzball_core.orchestrate.object_cache_routes import NODE_OBJECTS_PATH
from fuzzball_core.webui.app import is_ui_path
from fuzzball_core.webui.session import CSRF_FIELD, CSRF_HEADER, SESSION_COOKIE, csrf_token
from fuzzball_core.webui.signin import SIGN_IN_FORM_COOKIE

EXAMPLES = int(os.environ.get("FUZZBALL_SCHEMATHESIS_EXAMPLES", "25"))
#: operations not sent to the Web UI: signing out ends the session the others are sent in
SIGNS_OUT = {"POST /signout"}
#: the sign-in form's guard, sent as its cookie and, in valid sign-in forms, as their field
SIGN_IN_GUARD = "fuzzed-sign-in-form"


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
    send = _sender(stack.servers.rest_url, auth, server_errors)
    _fuzz_each(schema, operations, {"id": [*known, "node-1"]}, lambda _operation: send)
    assert server_errors == []


def test_no_web_ui_route_answers_a_generated_request_with_a_server_error(tmp_path):
    stack = IsolationStack(tmp_path)
    try:
        admin = stack.tenants.admin_token
        root = stack.rest_url.removesuffix("/v3")
        auth = {"Authorization": f"Bearer {admin}", CSRF_HEADER: csrf_token(admin)}
        schema = schemathesis.openapi.from_url(f"{stack.rest_url}/openapi.json", headers=auth)
        operations = [
            operation
            for operation in (result.ok() for result in schema.get_all_operations())
            if is_ui_path(operation.path) and operation.label not in SIGNS_OUT
        ]
        assert "POST /editor/start" in {operation.label for operation in operations}
        owned = stack.owned
        real = {"node": [owned.node], "workflow": [owned.workflow], "hold": [owned.hold]}
        cookies = {SESSION_COOKIE: admin, SIGN_IN_FORM_COOKIE: SIGN_IN_GUARD}
        server_errors: list[str] = []
        send = _sender(root, auth, server_errors, cookies=cookies)
        _fuzz_each(schema, operations, real, lambda _operation: send)
        assert server_errors == []
    finally:
        stack.close()


def test_no_process_route_answers_a_generated_request_with_a_server_error(tmp_path):
    """The routes Orchestrate adds to the gateway (storage, provisioners, central
    configuration, monitoring, object cache, OIDC, health), fuzzed as it serves them, as the
    cluster administrator; the gateway's own routes are the first test's."""
    stack = IsolationStack(tmp_path)
    try:
        admin = stack.tenants.admin_token
        root = stack.rest_url.removesuffix("/v3")
        auth = {"Authorization": f"Bearer {admin}"}
        schema = schemathesis.openapi.from_url(f"{stack.rest_url}/openapi.json", headers=auth)
        gateways = gateway_operations()
        operations = [
            operation
            for operation in (result.ok() for result in schema.get_all_operations())
            if not is_ui_path(operation.path) and operation.label not in gateways
        ]
        assert "POST /v3/volumes" in {operation.label for operation in operations}
        owned = stack.owned
        real = {
            "id": [
                owned.volume,
                owned.storage_class,
                owned.storage_driver,
                owned.provisioner_definition,
                owned.provisioner_instance,
            ],
            "scope": ["user", "group"],
        }
        server_errors: list[str] = []
        as_admin = _sender(root, auth, server_errors)
        # the nodes' own routes take the node token alone: the admin's stops at their 401
        as_node = _sender(root, {"Authorization": f"Bearer {NODE_TOKEN}"}, server_errors)
        _fuzz_each(
            schema,
            operations,
            real,
            lambda operation: as_node if operation.path.startswith(NODE_OBJECTS_PATH) else as_admin,
        )
        assert server_errors == []
    finally:
        stack.close()


def _fuzz_each(
    schema: schemathesis.BaseSchema,
    operations: list[schemathesis.APIOperation],
    real: dict[str, list[str]],
    sender: Callable[[schemathesis.APIOperation], Callable[[schemathesis.Case], None]],
) -> None:
    """Send each operation's boundary cases, then its generated requests of each mode, with
    the sender ``sender`` chooses for it (``real``: see :func:`_fuzz`)."""
    for operation in operations:
        send = sender(operation)
        for case in _boundary_cases(schema, operation):
            send(case)
        for mode in schemathesis.GenerationMode:
            _fuzz(operation, mode, real, send)


def _sender(
    base_url: str,
    auth: dict[str, str],
    server_errors: list[str],
    cookies: dict[str, str] | None = None,
) -> Callable[[schemathesis.Case], None]:
    """Send a case (with ``cookies``, if any); a 5xx answer is added to ``server_errors`` as
    ``METHOD PATH -> STATUS BODY``."""

    def send(case: schemathesis.Case) -> None:
        response = case.call(
            base_url=base_url, headers=auth, cookies=cookies, timeout=30, allow_redirects=False
        )
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
    real: dict[str, list[str]],
    send: Callable[[schemathesis.Case], None],
) -> None:
    """Send ``EXAMPLES`` generated requests of ``operation`` in ``mode``; a valid one's path
    parameter named in ``real`` is now and then one of its real values there, so that
    lookups succeed too, and a valid sign-in form carries the sign-in form's guard, so that
    its email and password are checked."""
    values = {
        name: st.one_of(st.sampled_from(known), st.text(min_size=1, max_size=40))
        for name, known in real.items()
    }

    @fuzz_settings(EXAMPLES)
    @given(case=operation.as_strategy(mode), data=st.data())
    def generated(case: schemathesis.Case, data: st.DataObject) -> None:
        if mode is schemathesis.GenerationMode.POSITIVE:
            for name in case.path_parameters or {}:
                if name in values:
                    case.path_parameters[name] = data.draw(values[name])
            if case.operation.label == "POST /signin" and isinstance(case.body, dict):
                case.body[CSRF_FIELD] = SIGN_IN_GUARD
        send(case)

    try:
        generated()
    except Unsatisfiable:
        # an operation with nothing a client can get wrong (no parameters, a body any JSON
        # object satisfies) has no invalid request to generate; valid ones were still sent
        if mode is not schemathesis.GenerationMode.NEGATIVE:
            raise
