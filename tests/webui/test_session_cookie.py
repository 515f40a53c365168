"""The session cookie's attributes, over HTTP and over HTTPS."""

from __future__ import annotations

import ssl
from types import SimpleNamespace
from typing import cast

from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from fuzzball_core.webui.context import UI, WebUi
from fuzzball_core.webui.session import SESSION_COOKIE, csrf_token, set_session


def signed_in(secure: bool = False, endpoint_cookie: str = "") -> web.Response:
    """The answer to a sign-in, by a Web UI whose endpoint proxy reads ``endpoint_cookie``."""
    app = web.Application()
    app[UI] = cast(WebUi, SimpleNamespace(endpoint_cookie=endpoint_cookie))
    context = ssl.create_default_context() if secure else None
    request = make_mocked_request("POST", "/signin", sslcontext=context, app=app)
    response = web.Response()
    set_session(request, response, "a-token")
    return response


def cookie_of(secure: bool) -> str:
    return signed_in(secure).cookies[SESSION_COOKIE].OutputString()


def test_a_sign_in_gives_the_endpoint_proxys_cookie_the_same_token_alike() -> None:
    cookies = signed_in(endpoint_cookie="fuzzball_endpoint_token").cookies
    endpoint = cookies["fuzzball_endpoint_token"]
    assert endpoint.value == cookies[SESSION_COOKIE].value == "a-token"
    assert {"httponly", "samesite=strict", "path=/"} <= {
        part.strip().lower() for part in endpoint.OutputString().split(";")
    }


def test_without_an_endpoint_proxy_only_the_session_cookie_is_set() -> None:
    assert list(signed_in().cookies) == [SESSION_COOKIE]


def test_the_session_cookie_is_httponly_strict_and_site_wide() -> None:
    attributes = [part.strip().lower() for part in cookie_of(secure=False).split(";")]
    assert {"httponly", "samesite=strict", "path=/"} <= set(attributes)
    assert "secure" not in attributes  # plain HTTP (a test cluster): the browser would drop it


def test_the_session_cookie_is_secure_over_https() -> None:
    assert "secure" in [part.strip().lower() for part in cookie_of(secure=True).split(";")]


def test_each_session_has_its_own_csrf_token() -> None:
    assert csrf_token("one") != csrf_token("two")
    assert csrf_token("one") == csrf_token("one")
