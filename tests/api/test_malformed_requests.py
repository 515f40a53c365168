"""Malformed requests that Orchestrate as it serves (``IsolationStack``) used to answer 500:
each is refused naming what is wrong.

A body sent as a form that is not a well-formed form is refused in the route's own way (a
Status, an OAuth error, an error page), and its bytes are not echoed: the gateway thread reads
every form body ahead of the handler, which is where these bodies failed. A query number that
only Unicode calls a digit, or too long for the store, is refused naming the parameter. A JSON
body is read as UTF-8 whatever charset its Content-Type names.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from support.isolation_stack import NODE_TOKEN, IsolationStack

from fuzzball_core.webui.session import CSRF_HEADER, SESSION_COOKIE, csrf_token

#: a multipart body whose part starts with a line that is not a header
BROKEN_MULTIPART = b"--xx\r\nhunter2\r\n\r\nvalue\r\n--xx--\r\n"
MULTIPART = "multipart/form-data; boundary=xx"
#: a multipart body whose closing boundary runs on into other bytes (aiohttp's own message
#: quotes them)
RUN_ON_MULTIPART = b'--xx\r\nContent-Disposition: form-data; name="a"\r\n\r\nv\r\n--xxhunter2\r\n'
#: a form whose field value holds a byte that is not UTF-8
NOT_UTF8_FORM = b"email=a%40b.test&password=hunter2\xff"
URLENCODED = "application/x-www-form-urlencoded"
TOKEN_PATH = "/auth/realms/fuzzball/protocol/openid-connect/token"


@pytest.fixture(scope="module")
def stack(tmp_path_factory) -> Iterator[IsolationStack]:
    served = IsolationStack(tmp_path_factory.mktemp("forms"))
    try:
        yield served
    finally:
        served.close()


def _post(
    stack: IsolationStack, path: str, body: bytes, content_type: str, **headers: str
) -> httpx.Response:
    root = stack.rest_url.removesuffix("/v3")
    return httpx.post(
        root + path, content=body, headers={"Content-Type": content_type, **headers}, timeout=30
    )


def _page_post(stack: IsolationStack, path: str, body: bytes, content_type: str) -> httpx.Response:
    """POST to a Web UI page as the admin, signed in, with the session's CSRF header."""
    token = stack.tenants.admin_token
    client = httpx.Client(cookies={SESSION_COOKIE: token}, timeout=30)
    with client:
        return client.post(
            stack.rest_url.removesuffix("/v3") + path,
            content=body,
            headers={"Content-Type": content_type, CSRF_HEADER: csrf_token(token)},
        )


def test_a_json_route_sent_a_broken_multipart_body_is_refused_as_invalid(stack):
    owner = stack.tenants.acme_owner.token
    reply = _post(
        stack, "/v3/accounts", BROKEN_MULTIPART, MULTIPART, Authorization=f"Bearer {owner}"
    )
    assert reply.status_code == 400, reply.text
    assert reply.json()["code"] == 3  # INVALID_ARGUMENT
    assert reply.json()["message"].startswith("request body: ")


def test_a_token_request_with_a_form_that_is_not_utf8_is_an_oauth_invalid_request(stack):
    reply = _post(stack, TOKEN_PATH, NOT_UTF8_FORM, URLENCODED)
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"] == "invalid_request"
    assert "not utf-8 text (byte 0xff at offset 33)" in reply.json()["error_description"]


def test_a_token_request_with_a_broken_multipart_body_is_an_oauth_invalid_request(stack):
    reply = _post(stack, TOKEN_PATH, BROKEN_MULTIPART, MULTIPART)
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"] == "invalid_request"


def test_a_malformed_form_is_refused_without_echoing_its_bytes(stack):
    reply = _post(stack, "/signin", RUN_ON_MULTIPART, MULTIPART)
    assert reply.status_code == 400, reply.text
    assert "not a well-formed multipart/form-data body" in reply.text
    assert "hunter2" not in reply.text


def test_a_sign_in_form_that_is_not_utf8_shows_the_form_again_saying_so(stack):
    reply = _post(stack, "/signin", NOT_UTF8_FORM, URLENCODED)
    assert reply.status_code == 400, reply.text
    assert "not utf-8 text" in reply.text
    assert "hunter2" not in reply.text


def test_a_page_form_with_a_broken_multipart_body_is_an_error_page(stack):
    reply = _page_post(stack, f"/nodes/{stack.owned.node}/cordon", BROKEN_MULTIPART, MULTIPART)
    assert reply.status_code == 400, reply.text
    assert "not a well-formed multipart/form-data body" in reply.text


def test_a_page_form_in_an_unknown_charset_is_an_error_page(stack):
    reply = _page_post(
        stack, f"/nodes/{stack.owned.node}/cordon", b"reason=x", f"{URLENCODED}; charset=bogus"
    )
    assert reply.status_code == 400, reply.text
    assert "charset that is not a known text encoding" in reply.text


@pytest.mark.parametrize("revision", ["9" * 30, "\u00b2"])
def test_a_central_configuration_revision_that_is_no_stored_number_is_refused(stack, revision):
    reply = stack.call(
        stack.tenants.admin_token, "GET", f"/admin/centralconfig?revision={revision}"
    )
    assert reply.status_code == 400, reply.text
    assert reply.json()["message"].startswith("revision: expected a whole number")


def test_a_workflow_log_page_after_a_number_only_unicode_calls_a_digit_is_an_error_page(stack):
    owner = stack.tenants.acme_owner.token
    reply = stack.page(owner, "GET", f"/workflows/{stack.owned.workflow}/log?after=\u00b2")
    assert reply.status_code == 400, reply.text
    assert "after: must be a whole number" in reply.text


def test_an_image_config_is_read_as_utf8_json_whatever_charset_its_content_type_names(stack):
    reply = httpx.put(
        f"{stack.rest_url}/node-objects/configs",
        content=b'{"architecture": "amd64"}',
        headers={
            "Authorization": f"Bearer {NODE_TOKEN}",
            "Content-Type": "application/json; charset=bogus",
        },
        timeout=30,
    )
    assert reply.status_code == 200, reply.text
    assert reply.json()["digest"].startswith("sha256:")


def test_a_storage_class_capacity_that_only_unicode_calls_a_number_is_refused(stack):
    capacity = {"size": "\u00b2", "unit": "GIB"}
    body = {"class": {"name": "squared", "driver": "local", "capacity": capacity}}
    reply = stack.call(stack.tenants.admin_token, "POST", "/admin/storage-classes", body)
    assert reply.status_code == 400, reply.text
    assert reply.json()["message"] == "class.capacity.size: must be a whole number (uint64)"


@pytest.mark.parametrize("ttl", ["nan", "1e999", "-1"])
def test_a_cache_entry_ttl_that_is_no_finite_number_of_seconds_is_refused(stack, ttl):
    reply = httpx.put(
        f"{stack.rest_url}/node-objects/group/ttl-probe?ttl={ttl}",
        content=b"content",
        headers={"Authorization": f"Bearer {NODE_TOKEN}"},
        timeout=30,
    )
    assert reply.status_code == 400, reply.text
    assert reply.json()["message"] == f"ttl: {ttl!r} is not a finite number of seconds from 0"
