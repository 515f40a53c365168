"""Signed-in visitors: the session cookie, CSRF tokens, and the wrapper every page uses.

The session cookie holds an API token of the visitor's personal account (issued at sign-in,
revoked at sign-out, expiring with ``accounts.token-lifetime``). It is HttpOnly (no script
reads it), SameSite=Strict, Path=/, and Secure when the page came over HTTPS. A session's
CSRF token is derived from the session token (an HMAC keyed with it), so only a page served
to that session can know it; every request that is not a GET must carry it, as the form
field ``csrf`` or the header ``X-CSRF-Token`` (htmx sends the header).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import quote

from aiohttp import web

from fuzzball_core.api.form_body import read_form
from fuzzball_core.api.openapi import Body, FormField, MediaOperation, Query
from fuzzball_core.errors import FuzzballError, Unauthenticated
from fuzzball_core.service.views import Principal
from fuzzball_core.vocabulary import WEB_UI_SESSION_COOKIE
from fuzzball_core.webui.context import ORCHESTRATE_NAV, UI
from fuzzball_core.webui.render import html

SESSION_COOKIE = WEB_UI_SESSION_COOKIE
CSRF_FIELD = "csrf"
CSRF_HEADER = "X-CSRF-Token"
#: the CSRF field as every signed-in page's form declares it (for the OpenAPI document)
CSRF_FORM_FIELD = FormField(
    CSRF_FIELD, {"type": "string"}, f"the session's CSRF token (or the {CSRF_HEADER} header)"
)
SIGN_IN_PATH = "/signin"
#: a page, and the page a signed-in page answers a refusal with (the error's status)
PAGE = Body("text/html", "the page")
ERROR_PAGE = Body("text/html", "an error page saying why, with the error's status")
_SAFE_METHODS = frozenset({"GET", "HEAD"})


@dataclass(frozen=True)
class Visitor:
    """A signed-in visitor: who they act as, their session's CSRF token, and the pages the
    serving process has for them (the main navigation)."""

    who: Principal
    csrf: str
    nav: tuple[tuple[str, str], ...] = ORCHESTRATE_NAV


PageHandler = Callable[[web.Request, Visitor], Awaitable[web.StreamResponse]]


def csrf_token(session_token: str) -> str:
    """The CSRF token of the session whose cookie holds ``session_token``."""
    return hmac.new(session_token.encode(), b"fuzzball-webui-csrf", hashlib.sha256).hexdigest()


def set_session(request: web.Request, response: web.StreamResponse, token: str) -> None:
    """Put ``token`` in the session cookie of ``response``, and in the endpoint proxy's
    cookie when Orchestrate serves one: a cookie is the host's whatever its port, so the
    proxy's path endpoints on this host see it. Subdomain endpoints (``{id}.<domain>``) see
    it too where this host is the endpoints domain or under it: the proxy's cookie is then
    the domain's (the proxy takes it off every request it passes on)."""
    for name, domain in _session_cookies(request):
        response.set_cookie(
            name,
            token,
            path="/",
            domain=domain,
            httponly=True,
            samesite="Strict",
            secure=request.secure,
        )


def clear_session(request: web.Request, response: web.StreamResponse) -> None:
    """Tell the browser to forget its session cookie (and the endpoint proxy's)."""
    for name, domain in _session_cookies(request):
        response.del_cookie(name, path="/", domain=domain)


def _session_cookies(request: web.Request) -> list[tuple[str, str | None]]:
    """The session's cookies and the domain each is set for (None: this host only)."""
    ui = request.app[UI]
    cookies: list[tuple[str, str | None]] = [(SESSION_COOKIE, None)]
    if ui.endpoint_cookie:
        cookies.append((ui.endpoint_cookie, _endpoints_domain_of(request, ui.endpoint_domain)))
    return cookies


def _endpoints_domain_of(request: web.Request, domain: str) -> str | None:
    """``domain`` where the browser would take a cookie for it from this page (this host is
    the domain or under it), else None."""
    host = (request.url.host or "").lower().rstrip(".")
    domain = domain.lower().strip(".")
    if domain and (host == domain or host.endswith(f".{domain}")):
        return domain
    return None


def sign_in_redirect(request: web.Request, *, expired: bool) -> web.StreamResponse:
    """Send the visitor to the sign-in page, to come back to this page afterwards.

    htmx requests get ``HX-Redirect`` instead of a 303, so that the whole page goes to the
    sign-in form rather than a fragment of it being swapped into the page."""
    back = request.path_qs if request.method in _SAFE_METHODS else "/"
    target = f"{SIGN_IN_PATH}?next={quote(back, safe='')}" + ("&expired=1" if expired else "")
    response: web.StreamResponse
    if request.headers.get("HX-Request") == "true":
        response = web.Response(status=200, headers={"HX-Redirect": target})
    else:
        response = web.Response(status=303, headers={"Location": target})
    if expired:
        clear_session(request, response)
    return response


async def _csrf_ok(request: web.Request, expected: str) -> bool:
    sent = request.headers.get(CSRF_HEADER)
    if sent is None and request.content_type in (
        "application/x-www-form-urlencoded",
        "multipart/form-data",
    ):
        sent = str((await read_form(request)).get(CSRF_FIELD, ""))
    return sent is not None and hmac.compare_digest(sent.encode(), expected.encode())


def error_page(visitor: Visitor | None, error: FuzzballError) -> web.Response:
    """The page saying what went wrong, with the error's HTTP status."""
    return html("error.html", status=error.http_status, visitor=visitor, message=error.message)


def page_operation(summary: str, *query: Query, reply: Body = PAGE) -> MediaOperation:
    """The declaration (for the OpenAPI document) of a page for signed-in visitors
    (:func:`page`): ``reply``, or an error page when refused, or without a valid session a
    303 to the sign-in page."""
    return MediaOperation(
        summary, reply, query=query, refusal=ERROR_PAGE, signed_in_page=True, tags=("web ui",)
    )


def page(handler: PageHandler) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """A page for signed-in visitors only.

    No session: the sign-in page. An expired or revoked one: the sign-in page saying so. A
    request that changes something without the session's CSRF token: 403. A refusal or bad
    input from the services: an error page with its status and message."""

    @functools.wraps(handler)
    async def serve(request: web.Request) -> web.StreamResponse:
        token = request.cookies.get(SESSION_COOKIE)
        if not token:
            return sign_in_redirect(request, expired=False)
        ui = request.app[UI]
        try:
            who = ui.service.authenticate(token).coming_from(request.remote or "")
        except Unauthenticated:
            return sign_in_redirect(request, expired=True)
        visitor = Visitor(who, csrf_token(token), ui.nav)
        try:
            if request.method not in _SAFE_METHODS and not await _csrf_ok(request, visitor.csrf):
                message = "this form is stale or came from another site (no valid CSRF token)"
                return html("error.html", status=403, visitor=visitor, message=message)
            return await handler(request, visitor)
        except FuzzballError as exc:
            return error_page(visitor, exc)

    return serve
