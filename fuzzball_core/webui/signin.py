"""Signing in and out: email and password through the identity service (so failed attempts
count towards its lockout and are audited), a session token for the personal account."""

from __future__ import annotations

import contextlib
import hmac
import secrets

from aiohttp import web

from fuzzball_core.errors import FailedPrecondition, NotFound, Unauthenticated
from fuzzball_core.service.oidc import REALM_PATH
from fuzzball_core.webui.context import UI
from fuzzball_core.webui.render import html
from fuzzball_core.webui.session import (
    CSRF_FIELD,
    SESSION_COOKIE,
    SIGN_IN_PATH,
    Visitor,
    clear_session,
    page,
    set_session,
)

SIGN_OUT_PATH = "/signout"
#: where a device (``fuzzball context login --device``) is approved
DEVICE_APPROVAL_PATH = f"{REALM_PATH}/device"
#: the sign-in form's own CSRF guard, before there is a session: the form's hidden field
#: must match this cookie (a page of another site can set neither)
_FORM_COOKIE = "fuzzball_signin"
_NOTICES = {
    "expired": "Your session has expired or was signed out elsewhere; please sign in again.",
    "signed_out": "You are signed out.",
}


def _next_page(target: str) -> str:
    """Where to go after signing in: a path of this site only (never ``//host`` or a URL)."""
    if target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return "/"


def _form(
    request: web.Request, *, status: int = 200, error: str = "", email: str = ""
) -> web.Response:
    guard = request.cookies.get(_FORM_COOKIE) or secrets.token_urlsafe(24)
    notice = next((text for key, text in _NOTICES.items() if request.query.get(key)), "")
    response = html(
        "signin.html",
        status=status,
        visitor=None,
        csrf=guard,
        error=error,
        notice=notice,
        email=email,
        next_page=_next_page(request.query.get("next", "/")),
        device_path=DEVICE_APPROVAL_PATH,
    )
    response.set_cookie(
        _FORM_COOKIE, guard, path=SIGN_IN_PATH, httponly=True, samesite="Strict",
        secure=request.secure,
    )  # fmt: skip
    return response


async def show_sign_in(request: web.Request) -> web.StreamResponse:
    """The sign-in form."""
    return _form(request)


async def sign_in(request: web.Request) -> web.StreamResponse:
    """Check the email and password; on success, a session cookie and on to the next page."""
    form = await request.post()
    email, password = str(form.get("email", "")), str(form.get("password", ""))
    guard = request.cookies.get(_FORM_COOKIE, "")
    if not guard or not hmac.compare_digest(guard, str(form.get(CSRF_FIELD, ""))):
        return _form(request, status=403, error="The form expired; please sign in again.")
    if not email.strip() or not password:
        return _form(request, status=400, error="Enter your email and password.", email=email)
    ui = request.app[UI]
    try:
        user = ui.identity.check_password(email, password, source=request.remote or "")
        who = ui.identity.login_principal(user.id)
        token = ui.identity.account_token(who, who.account_id, source=request.remote or "")
    except (Unauthenticated, FailedPrecondition, NotFound) as exc:
        status = 401 if isinstance(exc, Unauthenticated) else 400
        return _form(request, status=status, error=exc.message, email=email)
    response = web.Response(
        status=303, headers={"Location": _next_page(str(form.get("next", "/")))}
    )
    set_session(request, response, token)
    response.del_cookie(_FORM_COOKIE, path=SIGN_IN_PATH)
    return response


@page
async def sign_out(request: web.Request, visitor: Visitor) -> web.StreamResponse:
    """Revoke the session's token and forget the cookie."""
    with contextlib.suppress(NotFound):  # revoked meanwhile: signed out all the same
        request.app[UI].accounts.revoke(request.cookies[SESSION_COOKIE])
    response = web.Response(status=303, headers={"Location": f"{SIGN_IN_PATH}?signed_out=1"})
    clear_session(response)
    return response


def add_routes(router: web.UrlDispatcher) -> None:
    """Register the sign-in and sign-out routes."""
    router.add_get(SIGN_IN_PATH, show_sign_in)
    router.add_post(SIGN_IN_PATH, sign_in)
    router.add_post(SIGN_OUT_PATH, sign_out)
