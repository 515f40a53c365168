"""A request Orchestrate refuses (any 4xx answer) changes no stored data.

Orchestrate as it serves (``IsolationStack``: SQLite store, every route, one of everything a
by-ID route can name) is sent invalid requests, and every row of every table of its store is
read before and after each; where the answer was 4xx the rows must be the same, but for audit
lines that record the refusal (``support.store_rows``). The requests are schemathesis'
invalid ones for every served operation (its coverage phase's and ``FUZZBALL_SCHEMATHESIS_EXAMPLES``
generated ones each), sent as the cluster administrator signed in to the Web UI too, so that
the refusal comes from the route's own checks rather than from authorization; about half of
them name real objects in their path. Then hand-written malformed writes: a workflow whose
YAML does not parse, a secret without a value, a storage class capacity that is no number,
identity and Web UI form posts with broken bodies.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import schemathesis
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from support.fuzz_runs import fuzz_settings
from support.isolation_stack import IsolationStack
from support.store_rows import StoreRows, changes, read_rows
from support.tenants import PASSWORD

from fuzzball_core.vocabulary import EventKind
from fuzzball_core.webui.session import CSRF_HEADER, SESSION_COOKIE, csrf_token

EXAMPLES = int(os.environ.get("FUZZBALL_SCHEMATHESIS_EXAMPLES", "25"))

BROKEN_MULTIPART = b"--xx\r\nhunter2\r\n\r\nvalue\r\n--xx--\r\n"
MULTIPART = "multipart/form-data; boundary=xx"
URLENCODED = "application/x-www-form-urlencoded"
NOT_UTF8_FORM = b"email=a%40b.test&password=hunter2\xff"


#: operations not sent: signing out ends the session every other request is sent in
SIGNS_OUT = {"POST /signout"}


@dataclass
class Served:
    """The stack and its store, read from outside the service."""

    stack: IsolationStack
    store: sa.Engine

    def rows(self) -> StoreRows:
        """Every row of the store now."""
        return read_rows(self.store)


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[Served]:
    directory = tmp_path_factory.mktemp("refusals")
    stack = IsolationStack(directory)
    store = sa.create_engine(f"sqlite:///{directory / 'orchestrate.db'}")
    try:
        _quieten(stack, store)
        yield Served(stack, store)
    finally:
        store.dispose()
        stack.close()


def _quieten(stack: IsolationStack, store: sa.Engine) -> None:
    """Let nothing but the requests change the store: the node (which no agent serves) keeps
    its lease, and the provisioner instance's request is recorded before the first one."""
    engine = stack.orchestrate.orchestrate.engine
    stack.orchestrate.call(lambda: engine.extend_leases(24 * 3600))
    requested = sa.text("SELECT count(*) FROM events WHERE kind = :kind")
    deadline = time.monotonic() + 30
    while True:
        with store.connect() as connection:
            kind = EventKind.INSTANCE_REQUESTED.value
            if connection.execute(requested, {"kind": kind}).scalar():
                return
        assert time.monotonic() < deadline, "the provisioner instance was never requested"
        time.sleep(0.05)


def test_no_generated_invalid_request_that_is_refused_changes_stored_data(served):
    stack = served.stack
    admin = stack.tenants.admin_token
    # as the administrator, over the API (a bearer token) and the Web UI (a signed-in session)
    auth = {
        "Authorization": f"Bearer {admin}",
        CSRF_HEADER: csrf_token(admin),
    }
    root = stack.rest_url.removesuffix("/v3")
    schema = schemathesis.openapi.from_url(f"{stack.rest_url}/openapi.json", headers=auth)
    refused_with_changes: list[str] = []
    send = _checked_sender(served, root, auth, refused_with_changes)
    real = _real_path_values(stack)
    for result in schema.get_all_operations():
        operation = result.ok()
        if operation.label in SIGNS_OUT:
            continue
        for case in _invalid_boundary_cases(schema, operation):
            send(case)
        _fuzz_invalid(operation, real, send)
    assert refused_with_changes == []
    # still signed in: the requests were the routes' to refuse, not authentication's
    assert stack.call(admin, "GET", "/admin/users").status_code == 200


def _checked_sender(
    served: Served, root: str, auth: dict[str, str], refused_with_changes: list[str]
) -> Callable[[schemathesis.Case], None]:
    """Send a case, reading the store before and after; a 4xx answer that came with changes
    is added to ``refused_with_changes`` as ``METHOD PATH -> STATUS: CHANGES``."""

    cookies = {SESSION_COOKIE: auth["Authorization"].removeprefix("Bearer ")}

    def send(case: schemathesis.Case) -> None:
        before = served.rows()
        response = case.call(
            base_url=root, headers=auth, cookies=cookies, timeout=30, allow_redirects=False
        )
        if 400 <= response.status_code < 500:
            changed = changes(before, served.rows())
            if changed:
                refused_with_changes.append(
                    f"{case.method} {case.formatted_path} -> {response.status_code} "
                    f"{response.text[:200]}: {changed[:5]}"
                )

    return send


def _real_path_values(stack: IsolationStack) -> dict[str, list[str]]:
    """For each path parameter name the stack's routes use, values that name real objects."""
    owned = stack.owned
    ids = [
        value
        for value in vars(owned).values()
        if value and value not in (owned.hold, owned.image, owned.provisioner_definition)
    ] + [owned.provisioner_definition]
    people = [stack.tenants.acme_owner.id, stack.tenants.acme_member.id]
    return {
        "id": ids + people,
        "holdId": [owned.hold],
        "hold": [owned.hold],
        "userId": people,
        "ref": [owned.endpoint, "notebook"],
        "node": [owned.node, "node-1"],
        "workflow": [owned.workflow],
        "scope": ["user", "group"],
        "name": [owned.image],
    }


def _invalid_boundary_cases(
    schema: schemathesis.BaseSchema, operation: schemathesis.APIOperation
) -> list[schemathesis.Case]:
    """Schemathesis' coverage phase, invalid cases only: each parameter and field just past
    its bounds, of the wrong type, or missing."""
    config = schema.config.generation_for(operation=operation, phase="coverage")
    return list(
        schema.iter_coverage_cases(
            operation,
            generation_modes=[schemathesis.GenerationMode.NEGATIVE],
            generation_config=config,
        )
    )


def _fuzz_invalid(
    operation: schemathesis.APIOperation,
    real: dict[str, list[str]],
    send: Callable[[schemathesis.Case], None],
) -> None:
    """Send ``EXAMPLES`` generated invalid requests of ``operation``; about half name real
    objects in their path (not a DELETE's: one made valid so would delete what later
    requests are meant to find)."""

    @fuzz_settings(EXAMPLES)
    @given(case=operation.as_strategy(schemathesis.GenerationMode.NEGATIVE), data=st.data())
    def generated(case: schemathesis.Case, data: st.DataObject) -> None:
        if case.method != "DELETE" and case.path_parameters and data.draw(st.booleans()):
            for name in case.path_parameters:
                if name in real:
                    case.path_parameters[name] = data.draw(st.sampled_from(real[name]))
        send(case)

    # an operation with nothing a client can get wrong has no invalid request to send
    with contextlib.suppress(Unsatisfiable):
        generated()


#: Malformed writes, each as (account, METHOD, path, body, content type): ``admin`` or
#: ``owner`` (acme's owner); a path with ``{owned_field}`` names that object of the stack.
MALFORMED_WRITES: dict[str, tuple[str, str, str, bytes, str]] = {
    "workflow YAML that does not parse": (
        "owner",
        "POST",
        "/v3/workflows",
        b'{"specification": "version: v1\\njobs: [unclosed", "name": "broken"}',
        "application/json",
    ),
    "workflow that is no JSON object": (
        "owner",
        "POST",
        "/v3/workflows",
        b'["version: v1"]',
        "application/json",
    ),
    "secret without a value": (
        "owner",
        "PUT",
        "/v3/secrets",
        b'{"name": "half", "scope": "SECRET_SCOPE_USER"}',
        "application/json",
    ),
    "secret update with a value of the wrong type": (
        "owner",
        "PATCH",
        "/v3/secrets/{user_secret}",
        b'{"value": {"value": 42}}',
        "application/json",
    ),
    "storage class capacity that is no number": (
        "admin",
        "POST",
        "/v3/admin/storage-classes",
        '{"class": {"name": "sq", "driver": "local", "capacity": {"size": "\u00b2"}}}'.encode(),
        "application/json",
    ),
    "storage class update with a broken body": (
        "admin",
        "PUT",
        "/v3/admin/storage-classes/{storage_class}",
        b'{"class": {"name": ',
        "application/json",
    ),
    "volume update that is no object": (
        "owner",
        "PUT",
        "/v3/volumes/{volume}",
        b'"results"',
        "application/json",
    ),
    "group account in a broken multipart body": (
        "owner",
        "POST",
        "/v3/accounts",
        BROKEN_MULTIPART,
        MULTIPART,
    ),
    "account rename to a name of the wrong type": (
        "owner",
        "PATCH",
        "/v3/accounts/{group}",
        b'{"name": ["lab"]}',
        "application/json",
    ),
    "organization member with an address that is no email": (
        "owner",
        "POST",
        "/v3/organization/members",
        b'{"email": "not an address", "role": "member"}',
        "application/json",
    ),
    "organization rename to an empty name": (
        "owner",
        "PATCH",
        "/v3/organization",
        b'{"name": ""}',
        "application/json",
    ),
    "user with no email": ("admin", "POST", "/v3/admin/users", b"{}", "application/json"),
    "password change to a weak password": (
        "owner",
        "POST",
        "/v3/profile/password",
        f'{{"currentPassword": "{PASSWORD}", "newPassword": "x"}}'.encode(),
        "application/json",
    ),
    "password change with the wrong current password": (
        "owner",
        "POST",
        "/v3/profile/password",
        b'{"currentPassword": "wrong", "newPassword": "Another-Sturdy-Lantern-43y"}',
        "application/json",
    ),
    "token request with a form that is not UTF-8": (
        "nobody",
        "POST",
        "/auth/realms/fuzzball/protocol/openid-connect/token",
        NOT_UTF8_FORM,
        URLENCODED,
    ),
    "sign-in form that is not UTF-8": ("nobody", "POST", "/signin", NOT_UTF8_FORM, URLENCODED),
    "node hold with an unknown effect": (
        "admin",
        "POST",
        "/v3/nodes/{node}/holds",
        b'{"effect": "melt"}',
        "application/json",
    ),
    "Web UI cordon in a broken multipart body": (
        "admin",
        "POST",
        "/nodes/{node}/cordon",
        BROKEN_MULTIPART,
        MULTIPART,
    ),
    "Web UI workflow start with YAML that does not parse": (
        "owner",
        "POST",
        "/editor/start",
        b"specification=version%3A+v1%0Ajobs%3A+%5Bunclosed&name=broken",
        URLENCODED,
    ),
    "Web UI evict in a form of an unknown charset": (
        "admin",
        "POST",
        "/nodes/{node}/evict",
        b"reason=maintenance",
        f"{URLENCODED}; charset=bogus",
    ),
}


@pytest.mark.parametrize("write", MALFORMED_WRITES)
def test_a_refused_malformed_write_changes_no_stored_data(served, write):
    account, method, path, body, content_type = MALFORMED_WRITES[write]
    before = served.rows()
    reply = _send(
        served.stack, account, method, path.format(**vars(served.stack.owned)), body, content_type
    )
    assert 400 <= reply.status_code < 500, reply.text
    assert changes(before, served.rows()) == []


def _send(
    stack: IsolationStack, account: str, method: str, path: str, body: bytes, content_type: str
) -> httpx.Response:
    """``METHOD PATH`` (from the root) as ``account``, by bearer token and signed-in session."""
    token = {"admin": stack.tenants.admin_token, "owner": stack.tenants.acme_owner.token}.get(
        account
    )
    headers: dict[str, Any] = {"Content-Type": content_type}
    if token is not None:
        headers |= {
            "Authorization": f"Bearer {token}",
            "Cookie": f"{SESSION_COOKIE}={token}",
            CSRF_HEADER: csrf_token(token),
        }
    return httpx.request(
        method,
        stack.rest_url.removesuffix("/v3") + path,
        content=body,
        headers=headers,
        timeout=30,
        follow_redirects=False,
    )
