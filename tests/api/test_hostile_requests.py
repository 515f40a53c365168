"""Hostile requests to every route of the served OpenAPI document are answered, never with a
server error: bodies of random bytes and of JSON that no schema-led generator writes
(integers of thousands of digits, nesting a thousand deep, lone surrogates), query values of
any bytes and digit runs, Authorization headers of any bytes. Schemathesis
(``test_schemathesis.py``) stays within what the schema says a value looks like; the 500s
that the issue lists were outside it.

``FUZZBALL_HOSTILE_EXAMPLES`` requests per route (40 by default).
"""

from __future__ import annotations

import json
import os
import re
from typing import Any
from urllib.parse import quote_from_bytes

import httpx
from hypothesis import given
from hypothesis import strategies as st
from support.fuzz_runs import fuzz_settings
from support.live_api import HELLO

EXAMPLES = int(os.environ.get("FUZZBALL_HOSTILE_EXAMPLES", "40"))

#: JSON scalars as they appear in request bodies, with the hostile ones among them.
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.integers(min_value=4000, max_value=6000).map(lambda digits: "9" * digits),
    st.text(max_size=20),
    st.sampled_from(["\\ud800", "\\udfff", "a\\u0000b", "\\u001b[2J"]).map(lambda e: f'"{e}"'),
)


def _json_text(value: Any) -> str:
    """``value`` as JSON text, with the strings that are already JSON text kept as written."""
    if isinstance(value, str) and (value.startswith('"\\') or value.startswith('"a\\')):
        return value
    if isinstance(value, str) and value.isdigit():
        return value  # a long digit run: an integer, unquoted
    if isinstance(value, dict):
        items = ", ".join(f"{json.dumps(k)}: {_json_text(v)}" for k, v in value.items())
        return "{" + items + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_json_text(item) for item in value) + "]"
    return json.dumps(value)


_fields = st.sampled_from(
    ["name", "rawSpecification", "definition", "effect", "reason", "version", "jobs", "x"]
)
_json = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(_fields, inner, max_size=3)
    ),
    max_leaves=8,
)
_deep = st.tuples(st.integers(60, 1200), st.sampled_from(["[", '{"a":'])).map(
    lambda nest: nest[1] * nest[0] + "1" + ("]" if nest[1] == "[" else "}") * nest[0]
)
_bodies = st.one_of(
    st.binary(max_size=64),
    _deep.map(str.encode),
    _json.map(lambda value: _json_text(value).encode("utf-8", "surrogatepass")),
    st.fixed_dictionaries(
        {"rawSpecification": st.just(HELLO), "name": _scalars},
    ).map(lambda body: _json_text(body).encode("utf-8", "surrogatepass")),
)
_query_values = st.one_of(
    st.binary(max_size=16).map(quote_from_bytes),
    st.integers(min_value=1, max_value=6000).map(lambda digits: "9" * digits),
    st.integers().map(str),
)
_authorization = st.binary(min_size=1, max_size=24).map(
    # (what HTTP lets a header carry: no controls, no trailing blanks)
    lambda token: (b"Bearer " + bytes(c for c in token if c >= 0x20 and c != 0x7F)).rstrip()
)


def _operations(document: dict) -> list[tuple[str, str, dict]]:
    return [
        (method.upper(), path, operation)
        for path, methods in document["paths"].items()
        for method, operation in methods.items()
    ]


def test_no_route_answers_hostile_bytes_with_a_server_error(module_stack):
    stack = module_stack
    workflow_id = stack.start(HELLO, name="hello")
    auth = {"Authorization": f"Bearer {stack.token}"}
    with httpx.Client(base_url=stack.servers.rest_url, timeout=30) as client:
        document = client.get("/v3/openapi.json", headers=auth).json()
        server_errors: list[str] = []
        for method, path, operation in _operations(document):
            server_errors += _fuzz(client, method, path, operation, auth, workflow_id)
    assert server_errors == []


def _fuzz(
    client: httpx.Client,
    method: str,
    path: str,
    operation: dict,
    auth: dict[str, str],
    workflow_id: str,
) -> list[str]:
    """Send ``EXAMPLES`` hostile requests to one operation; the 5xx answers, described."""
    found: list[str] = []
    filled = path.replace("{id}", workflow_id if "/workflows/" in path else "node-1")
    query_names = [p["name"] for p in operation["parameters"] if p["in"] == "query"]
    has_body = "requestBody" in operation

    @fuzz_settings(EXAMPLES)
    @given(
        body=_bodies if has_body else st.none(),
        query=st.dictionaries(st.sampled_from(query_names), _query_values)
        if query_names
        else st.just({}),
        hold_id=_query_values,
        header=st.one_of(st.just(None), _authorization),
    )
    def send(body: bytes | None, query: dict, hold_id: str, header: bytes | None) -> None:
        url = re.sub(r"\{holdId\}", hold_id, filled)
        if query:
            url += "?" + "&".join(f"{name}={value}" for name, value in query.items())
        headers: dict[str, Any] = dict(auth) if header is None else {"Authorization": header}
        response = client.request(method, url, content=body, headers=headers)
        if response.status_code >= 500:
            found.append(f"{method} {url[:120]} {body!r:.80} -> {response.text[:200]}")

    send()
    return found
