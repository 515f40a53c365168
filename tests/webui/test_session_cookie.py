"""The session cookie's attributes, over HTTP and over HTTPS."""

from __future__ import annotations

import ssl

from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from fuzzball_core.webui.session import SESSION_COOKIE, csrf_token, set_session


def cookie_of(secure: bool) -> str:
    context = ssl.create_default_context() if secure else None
    request = make_mocked_request("POST", "/signin", sslcontext=context)
    response = web.Response()
    set_session(request, response, "a-token")
    return response.cookies[SESSION_COOKIE].OutputString()


def test_the_session_cookie_is_httponly_strict_and_site_wide() -> None:
    attributes = [part.strip().lower() for part in cookie_of(secure=False).split(";")]
    assert {"httponly", "samesite=strict", "path=/"} <= set(attributes)
    assert "secure" not in attributes  # plain HTTP (a test cluster): the browser would drop it


def test_the_session_cookie_is_secure_over_https() -> None:
    assert "secure" in [part.strip().lower() for part in cookie_of(secure=True).split(";")]


def test_each_session_has_its_own_csrf_token() -> None:
    assert csrf_token("one") != csrf_token("two")
    assert csrf_token("one") == csrf_token("one")
