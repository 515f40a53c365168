"""The session cookie's attributes, over HTTP and over HTTPS."""

from __future__ import annotations

import ssl
from collections.abc import Callable
from http.cookies import Morsel
from types import SimpleNamespace
from typing import cast

from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from fuzzball_core.webui.context import UI, WebUi
from fuzzball_core.webui.session import SESSION_COOKIE, clear_session, csrf_token, set_session


def answer(
    act: Callable[[web.Request, web.Response], None],
    secure: bool = False,
    endpoint_cookie: str = "",
    endpoint_domain: str = "",
    host: str = "fb.example",
) -> web.Response:
    """The answer of a Web UI at ``host`` whose endpoint proxy reads ``endpoint_cookie`` and
    serves subdomain endpoints under ``endpoint_domain``, after ``act``."""
    app = web.Application()
    app[UI] = cast(
        WebUi, SimpleNamespace(endpoint_cookie=endpoint_cookie, endpoint_domain=endpoint_domain)
    )
    context = ssl.create_default_context() if secure else None
    request = make_mocked_request(
        "POST", "/signin", headers={"Host": host}, sslcontext=context, app=app
    )
    response = web.Response()
    act(request, response)
    return response


def signed_in(secure: bool = False, endpoint_cookie: str = "", **where: str) -> web.Response:
    """The answer to a sign-in."""
    return answer(
        lambda request, response: set_session(request, response, "a-token"),
        secure,
        endpoint_cookie,
        **where,
    )


def attributes(cookie: Morsel[str]) -> set[str]:
    return {part.strip().lower() for part in cookie.OutputString().split(";")}


def cookie_of(secure: bool) -> str:
    return signed_in(secure).cookies[SESSION_COOKIE].OutputString()


def test_a_sign_in_gives_the_endpoint_proxys_cookie_the_same_token_alike() -> None:
    cookies = signed_in(endpoint_cookie="fuzzball_endpoint_token").cookies
    endpoint = cookies["fuzzball_endpoint_token"]
    assert endpoint.value == cookies[SESSION_COOKIE].value == "a-token"
    assert {"httponly", "samesite=strict", "path=/"} <= attributes(endpoint)


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


def test_the_endpoint_cookie_is_the_endpoints_domains_where_the_web_ui_is_that_domain() -> None:
    cookies = signed_in(
        endpoint_cookie="fuzzball_endpoint_token", endpoint_domain="fb.example", host="fb.example"
    ).cookies
    # {id}.fb.example, the subdomain endpoints, get it; the session cookie stays this host's
    assert "domain=fb.example" in attributes(cookies["fuzzball_endpoint_token"])
    assert not any(a.startswith("domain=") for a in attributes(cookies[SESSION_COOKIE]))


def test_the_endpoint_cookie_is_the_endpoints_domains_where_the_web_ui_is_under_it() -> None:
    cookies = signed_in(
        endpoint_cookie="fuzzball_endpoint_token",
        endpoint_domain="fb.example",
        host="ui.fb.example:8443",
    ).cookies
    assert "domain=fb.example" in attributes(cookies["fuzzball_endpoint_token"])


def test_the_endpoint_cookie_stays_the_hosts_where_the_browser_would_refuse_the_domain() -> None:
    cookies = signed_in(
        endpoint_cookie="fuzzball_endpoint_token",
        endpoint_domain="apps.example",
        host="fb.example",
    ).cookies
    assert not any(a.startswith("domain=") for a in attributes(cookies["fuzzball_endpoint_token"]))


def test_signing_out_forgets_the_endpoint_cookie_of_the_domain_it_was_set_for() -> None:
    cleared = answer(
        clear_session,
        endpoint_cookie="fuzzball_endpoint_token",
        endpoint_domain="fb.example",
        host="fb.example",
    ).cookies["fuzzball_endpoint_token"]
    assert {"domain=fb.example", "max-age=0"} <= attributes(cleared)
