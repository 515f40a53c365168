"""Hostile input to the REST gateway is a 4xx google.rpc.Status naming what is wrong: never a
500, never a plain-text aiohttp page, never a traceback in the server's log."""

from __future__ import annotations

import json
import logging
import socket
from urllib.parse import urlsplit

import httpx
import pytest
from support.live_api import HELLO, Stack

from fuzzball_core.api.http_errors import MAX_BODY_BYTES, MAX_HEADER_FIELD, MAX_REQUEST_LINE
from fuzzball_core.api.json_body import MAX_JSON_DEPTH
from fuzzball_core.spec.names import MAX_HOLD_REASON, MAX_WORKFLOW_NAME


def send(
    stack: Stack, method: str, path: str, *, headers: dict | None = None, **kwargs
) -> httpx.Response:
    sent = {"Authorization": f"Bearer {stack.token}", **(headers or {})}
    return httpx.request(
        method, f"{stack.servers.rest_url}/v3{path}", headers=sent, timeout=10, **kwargs
    )


def refused(response: httpx.Response, http: int = 400, code: int = 3) -> str:
    """The message of a google.rpc.Status reply with the given statuses."""
    assert response.status_code == http, response.text
    assert response.headers["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"code", "message", "details"}
    assert body["code"] == code
    return body["message"]


@pytest.fixture(autouse=True)
def no_traceback_logged(caplog):
    """Every test here: a client's mistake leaves no traceback in the server's log."""
    caplog.set_level(logging.DEBUG)
    yield
    traced = [r for r in caplog.records if r.exc_info is not None or r.levelno >= logging.ERROR]
    assert traced == [], [r.getMessage() for r in traced]


def start_body(**fields) -> bytes:
    return json.dumps({"rawSpecification": HELLO, **fields}).encode()


# -- bodies ----------------------------------------------------------------------------------


def test_a_body_that_is_not_utf8_is_400_naming_the_byte(stack):
    message = refused(send(stack, "POST", "/workflows", content=b'{"name": "caf\xe9"}'))
    assert message == "request body: not UTF-8 text (byte 0xe9 at offset 13)"


def test_an_integer_of_thousands_of_digits_is_400(stack):
    body = b'{"rawSpecification": "x", "name": ' + b"9" * 5000 + b"}"
    assert "at most 40 digits" in refused(send(stack, "POST", "/workflows", content=body))


@pytest.mark.parametrize("opening", ["[", '{"a":'])
def test_json_nested_a_thousand_deep_is_400(stack, opening):
    closing = "]" if opening == "[" else "}"
    body = (opening * 1000 + "1" + closing * 1000).encode()
    message = refused(send(stack, "POST", "/workflows:validate", content=body))
    assert message == f"request body: JSON nested deeper than {MAX_JSON_DEPTH} levels"


def test_a_definition_nested_to_the_limit_is_read(stack):
    deep: dict = {}
    for _ in range(MAX_JSON_DEPTH - 3):  # the body and the definition are two levels
        deep = {"a": deep}
    body = json.dumps({"definition": {"version": "v1", "x": deep}}).encode()
    # read, and refused by the workflow's own rules (x is no field), not for its depth
    assert "x" in refused(send(stack, "POST", "/workflows:validate", content=body))


def test_a_lone_surrogate_in_a_workflow_name_is_400_naming_it(stack):
    body = start_body().replace(b"{", b'{"name": "a\\ud800b", ', 1)
    message = refused(send(stack, "POST", "/workflows", content=body))
    assert message.startswith("name: holds a lone UTF-16 surrogate")


def test_a_lone_surrogate_in_a_definition_key_is_400(stack):
    body = b'{"definition": {"version": "v1", "\\udc80": 1}}'
    message = refused(send(stack, "POST", "/workflows:validate", content=body))
    assert "surrogate" in message


def test_a_lone_surrogate_in_a_hold_reason_is_400_naming_it(stack):
    body = b'{"effect": "cordon", "reason": "\\udc00"}'
    message = refused(send(stack, "POST", "/nodes/node-1/holds", content=body))
    assert message.startswith("reason: holds a lone UTF-16 surrogate")


def test_a_body_over_the_limit_is_413_with_a_status_body(stack):
    body = b" " * (MAX_BODY_BYTES + 1)
    message = refused(send(stack, "POST", "/workflows", content=body), http=413)
    assert message == f"request body: larger than {MAX_BODY_BYTES} bytes"


# -- names -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "shown"),
    [("bad\x00name", "U+0000"), ("\x1b[2J\x1b[31mred", "U+001B"), ("two\nlines", "U+000A")],
)
def test_a_workflow_name_with_a_control_character_is_400_naming_it(stack, name, shown):
    message = refused(send(stack, "POST", "/workflows", content=start_body(name=name)))
    assert message.startswith("name: character")
    assert shown in message
    assert stack.service.list_workflows(stack.who) == []


def test_a_workflow_name_with_a_bidirectional_override_is_400(stack):
    response = send(stack, "POST", "/workflows", content=start_body(name="invoice\u202efdp.exe"))
    assert "U+202E" in refused(response)


def test_a_workflow_name_of_100000_characters_is_400(stack):
    response = send(stack, "POST", "/workflows", content=start_body(name="a" * 100_000))
    assert refused(response) == (
        f"name: 100000 characters; at most {MAX_WORKFLOW_NAME} are accepted"
    )


def test_a_printable_unicode_workflow_name_is_kept(stack):
    response = send(stack, "POST", "/workflows", content=start_body(name="Résumé 2 — größe"))
    assert response.status_code == 200
    workflow = stack.service.get_workflow(stack.who, response.json()["id"])
    assert workflow.name == "Résumé 2 — größe"


def test_a_hold_reason_with_an_escape_sequence_is_400(stack):
    body = json.dumps({"effect": "cordon", "reason": "disk \x1b[8m"}).encode()
    assert "U+001B" in refused(send(stack, "POST", "/nodes/node-1/holds", content=body))


def test_a_hold_reason_over_the_limit_is_400(stack):
    body = json.dumps({"effect": "cordon", "reason": "r" * (MAX_HOLD_REASON + 1)}).encode()
    message = refused(send(stack, "POST", "/nodes/node-1/holds", content=body))
    assert message.startswith("reason: ")


# -- numbers in the URL ----------------------------------------------------------------------


@pytest.mark.parametrize("value", ["9" * 30, str(2**63), str(2**31)])
def test_after_seq_past_the_wire_schemas_int32_is_400_naming_it(stack, value):
    workflow_id = stack.start()
    message = refused(send(stack, "GET", f"/workflows/{workflow_id}:events?afterSeq={value}"))
    assert message.startswith("afterSeq: out of range")


def test_a_node_events_after_seq_past_64_bits_is_400(stack):
    message = refused(send(stack, "GET", f"/nodes/node-1:events?afterSeq={'9' * 5000}"))
    assert message.startswith("afterSeq: out of range")


def test_a_task_id_past_64_bits_is_400_naming_it(stack):
    workflow_id = stack.start()
    message = refused(send(stack, "GET", f"/workflows/{workflow_id}:log?taskId={2**64}"))
    assert message.startswith("taskId: out of range")


def test_a_hold_id_past_64_bits_is_400_naming_it(stack):
    message = refused(send(stack, "DELETE", f"/nodes/node-1/holds/{2**63}"))
    assert message.startswith("holdId: out of range")


def test_a_query_integer_in_other_digits_is_400(stack):
    workflow_id = stack.start()
    response = send(stack, "GET", f"/workflows/{workflow_id}:events?afterSeq=\u0663")  # Arabic 3
    assert refused(response).startswith("afterSeq: expected an integer")


# -- headers and the request line ------------------------------------------------------------


def raw_request(stack: Stack, head: bytes) -> tuple[int, dict, bytes]:
    """Send ``head`` (a request line and headers) on a socket; the reply's status, headers
    and body. httpx refuses to send what these tests need sent."""
    url = urlsplit(stack.servers.rest_url)
    with socket.create_connection((url.hostname, url.port), timeout=10) as connection:
        connection.sendall(head + b"\r\n")
        reply = b""
        while chunk := connection.recv(65536):
            reply += chunk
    head_text, _, body = reply.partition(b"\r\n\r\n")
    status_line, *header_lines = head_text.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in header_lines)
    return int(status_line.split()[1]), {k.lower(): v for k, v in headers.items()}, body


def test_a_non_ascii_authorization_header_is_401_naming_the_header(stack):
    status, _headers, body = raw_request(
        stack,
        b"GET /v3/workflows HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        b"Authorization: Bearer caf\xe9\r\n",
    )
    assert status == 401
    assert json.loads(body) == {
        "code": 16,
        "message": "Authorization: a bearer token is printable ASCII",
        "details": [],
    }


def test_a_url_past_the_limit_is_414_with_a_status_body(stack):
    path = b"/v3/workflows/" + b"a" * MAX_REQUEST_LINE
    status, headers, body = raw_request(
        stack, b"GET " + path + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
    )
    assert status == 414
    assert headers["content-type"].startswith("application/json")
    assert json.loads(body) == {
        "code": 3,
        "message": f"request line: longer than {MAX_REQUEST_LINE} bytes",
        "details": [],
    }


def test_a_header_past_the_limit_is_431_with_a_status_body(stack):
    big = b"X-Big: " + b"a" * (2 * MAX_HEADER_FIELD)
    status, _headers, body = raw_request(
        stack, b"GET /v3/version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + big + b"\r\n"
    )
    assert status == 431
    assert json.loads(body)["message"] == (
        f"request header: a field is longer than {MAX_HEADER_FIELD} bytes"
    )


def test_a_malformed_request_line_is_400_with_a_status_body(stack):
    status, _headers, body = raw_request(stack, b"GET /v3/version HTTP/9x\r\nHost: x\r\n")
    assert status == 400
    assert json.loads(body)["message"].startswith("malformed HTTP request: ")
