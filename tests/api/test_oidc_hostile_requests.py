"""Hostile requests to the OIDC issuer's routes are answered, never with a server error:
form bodies of any bytes (fields given twice, names and values past UTF-8, huge values),
any content type, and query strings of any bytes on the approval page.

``FUZZBALL_HOSTILE_EXAMPLES`` requests per route (40 by default).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from urllib.parse import quote_from_bytes

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.oidc_stack import OidcStack, running_oidc_stack

from fuzzball_core.orchestrate.oidc_routes import (
    APPROVAL_PATH,
    DEVICE_AUTHORIZATION_PATH,
    LOGOUT_PATH,
    TOKEN_PATH,
)

EXAMPLES = int(os.environ.get("FUZZBALL_HOSTILE_EXAMPLES", "40"))
FORM_FIELDS = [
    "client_id",
    "grant_type",
    "username",
    "password",
    "scope",
    "refresh_token",
    "device_code",
    "user_code",
    "action",
]
HOSTILE = settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None
)

#: a field's value: known grant types and clients among any bytes
_values = st.one_of(
    st.binary(max_size=60),
    st.sampled_from(
        [b"password", b"refresh_token", b"urn:ietf:params:oauth:grant-type:device_code"]
    ),
    st.sampled_from([b"fuzzball-cli", b"offline_access", b"approve", b"deny"]),
)
_forms = st.lists(
    st.tuples(
        st.one_of(st.sampled_from(FORM_FIELDS).map(str.encode), st.binary(max_size=10)), _values
    ),
    max_size=8,
).map(
    lambda pairs: b"&".join(
        quote_from_bytes(k).encode() + b"=" + quote_from_bytes(v).encode() for k, v in pairs
    )
)
_bodies = st.one_of(_forms, st.binary(max_size=200))
_content_types = st.sampled_from(
    ["application/x-www-form-urlencoded", "application/json", "multipart/form-data", "text/plain"]
)


@pytest.fixture(scope="module")
def oidc_module(tmp_path_factory) -> Iterator[OidcStack]:
    with running_oidc_stack(tmp_path_factory.mktemp("oidc")) as stack:
        stack.organization("lab", "ada@example.org")
        yield stack


@pytest.mark.parametrize(
    "path", [TOKEN_PATH, DEVICE_AUTHORIZATION_PATH, LOGOUT_PATH, APPROVAL_PATH]
)
def test_any_post_body_is_answered_without_a_server_error(oidc_module, path):
    @HOSTILE
    @given(body=_bodies, content_type=_content_types)
    def post(body: bytes, content_type: str) -> None:
        reply = httpx.post(
            f"{oidc_module.url}{path}", content=body, headers={"Content-Type": content_type}
        )
        assert reply.status_code < 500, reply.text

    post()


def test_any_query_of_the_approval_page_is_answered_without_a_server_error(oidc_module):
    @HOSTILE
    @given(query=st.binary(max_size=80))
    def get(query: bytes) -> None:
        url = f"{oidc_module.url}{APPROVAL_PATH}?user_code={quote_from_bytes(query)}"
        reply = httpx.get(url)
        assert reply.status_code == 200
        assert "<script" not in reply.text.lower().replace("&lt;script", "")

    get()
