"""Signing in and out: email and password through the identity service (so failed attempts
count towards its lockout and are audited), a session token for the personal account.

Federate has no identity service (no users, no passwords): its visitors paste an API token
of their Federate account instead, and the session gets a token of its own for that account
(so signing out revokes the session's token, never the pasted one)."""

from __future__ import annotations

import contextlib
import hmac
import secrets

from aiohttp import web

from fuzzball_core.api.form_body import read_form
from fuzzball_core.api.openapi import FormField, FormOperation, MediaOperation, Query, documented
from fuzzball_core.errors import FailedPrecondition, InvalidArgument, NotFound, Unauthenticated
from fuzzball_core.service.identity import Identity
from fuzzball_core.service.oidc import REALM_PATH
from fuzzball_core.vocabulary import CredentialKind
from fuzzball_core.webui.context import UI, WebUi
from fuzzball_core.webui.render import html
from fuzzball_core.webui.session import (
    CSRF_FIELD,
    CSRF_FORM_FIELD,
    PAGE,
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
SIGN_IN_FORM_COOKIE = "fuzzball_signin"
_TEXT = {"type": "string"}
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
    """The sign-in form (with a token field instead of email and password on Federate)."""
    guard = request.cookies.get(SIGN_IN_FORM_COOKIE) or secrets.token_urlsafe(24)
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
        token_sign_in=request.app[UI].identity is None,
    )
    response.set_cookie(
        SIGN_IN_FORM_COOKIE, guard, path=SIGN_IN_PATH, httponly=True, samesite="Strict",
        secure=request.secure,
    )  # fmt: skip
    return response


@documented(
    MediaOperation(
        "the sign-in form (setting its own CSRF guard's cookie)",
        PAGE,
        query=(
            Query("next", "string", "the path to go on to once signed in: one of this site's"),
            Query("expired", "string", "any value: say the session expired"),
            Query("signed_out", "string", "any value: say the visitor signed out"),
        ),
        tags=("web ui",),
    )
)
async def show_sign_in(request: web.Request) -> web.StreamResponse:
    """The sign-in form."""
    return _form(request)


@documented(
    FormOperation(
        "sign in",
        "on to the next page (the field next), with the session cookie set",
        (
            FormField(
                CSRF_FIELD,
                _TEXT,
                "the sign-in form's own CSRF token: its cookie's value",
                required=True,
            ),
            FormField("email", _TEXT, "the user's email (Orchestrate)"),
            FormField("password", _TEXT, "the user's password (Orchestrate)"),
            FormField("token", _TEXT, "an API token of a Federate account (Federate)"),
            FormField("next", _TEXT, "the path to go on to: one of this site's; otherwise /"),
        ),
        refusal="the sign-in form saying why",
        signed_in_page=False,
    )
)
async def sign_in(request: web.Request) -> web.StreamResponse:
    """Check the email and password; on success, a session cookie and on to the next page."""
    try:
        form = await read_form(request)
    except InvalidArgument as exc:
        return _form(request, status=400, error=exc.message)
    guard = request.cookies.get(SIGN_IN_FORM_COOKIE, "")
    if not guard or not hmac.compare_digest(guard, str(form.get(CSRF_FIELD, ""))):
        return _form(request, status=403, error="The form expired; please sign in again.")
    ui = request.app[UI]
    email = str(form.get("email", ""))
    try:
        if ui.identity is None:
            token = _token_session(ui, str(form.get("token", "")).strip())
        else:
            token = _password_session(ui.identity, email, str(form.get("password", "")), request)
    except InvalidArgument as exc:
        return _form(request, status=400, error=exc.message, email=email)
    except (Unauthenticated, FailedPrecondition, NotFound) as exc:
        status = 401 if isinstance(exc, Unauthenticated) else 400
        return _form(request, status=status, error=exc.message, email=email)
    response = web.Response(
        status=303, headers={"Location": _next_page(str(form.get("next", "/")))}
    )
    set_session(request, response, token)
    response.del_cookie(SIGN_IN_FORM_COOKIE, path=SIGN_IN_PATH)
    return response


def _password_session(identity: Identity, email: str, password: str, request: web.Request) -> str:
    """A session token for the user whose email and password these are."""
    if not email.strip() or not password:
        raise InvalidArgument("Enter your email and password.")
    user = identity.check_password(email, password, source=request.remote or "")
    who = identity.login_principal(user.id)
    return identity.account_token(who, who.account_id, source=request.remote or "")


def _token_session(ui: WebUi, token: str) -> str:
    """A session token for the account whose API token ``token`` is (Federate's sign-in)."""
    if not token:
        raise InvalidArgument("Paste an API token of your Federate account.")
    who = ui.service.authenticate(token)  # Unauthenticated: unknown, expired or revoked
    if who.credential == CredentialKind.WORKFLOW:
        raise Unauthenticated("a workflow's token cannot sign in; use your account's API token")
    return ui.accounts.issue_for(who.account_id, user_id=who.user_id, credential=who.credential)


@documented(FormOperation("sign out", "to the sign-in page, saying so", (CSRF_FORM_FIELD,)))
@page
async def sign_out(request: web.Request, visitor: Visitor) -> web.StreamResponse:
    """Revoke the session's token and forget the cookie."""
    with contextlib.suppress(NotFound):  # revoked meanwhile: signed out all the same
        request.app[UI].accounts.revoke(request.cookies[SESSION_COOKIE])
    response = web.Response(status=303, headers={"Location": f"{SIGN_IN_PATH}?signed_out=1"})
    clear_session(request, response)
    return response


def add_routes(router: web.UrlDispatcher) -> None:
    """Register the sign-in and sign-out routes."""
    router.add_get(SIGN_IN_PATH, show_sign_in)
    router.add_post(SIGN_IN_PATH, sign_in)
    router.add_post(SIGN_OUT_PATH, sign_out)
