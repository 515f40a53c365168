"""The OIDC issuer over HTTP, at ``<REST root>/auth/realms/fuzzball`` (Keycloak's layout,
which Fuzzball's clients expect):

* ``GET  /.well-known/openid-configuration``: the provider metadata;
* ``GET  /protocol/openid-connect/certs``: the JWKS that verifies access tokens;
* ``POST /protocol/openid-connect/token``: ``grant_type`` ``password``, ``refresh_token`` or
  ``urn:ietf:params:oauth:grant-type:device_code``, for client ``fuzzball-cli``;
* ``POST /protocol/openid-connect/auth/device``: the device authorization endpoint;
* ``GET|POST /device``: the page where a person signs in and approves or denies a user code;
* ``POST /protocol/openid-connect/logout``: revokes a refresh token.

None needs a bearer token. Requests are form-encoded; errors are OAuth 2.0 JSON bodies
(``{"error", "error_description"}``, 400, or 401 for an unknown client), never a traceback.
The approval page sets no cookie and acts only on a POST carrying the user's own email and
password, so another site can make a browser submit nothing useful to it (no CSRF token is
needed); it refuses to be framed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from html import escape
from typing import Any

from aiohttp import web

from fuzzball_core.api.form_body import read_form
from fuzzball_core.api.openapi import documented
from fuzzball_core.api.rest import ExtraRoutes
from fuzzball_core.errors import FailedPrecondition, InvalidArgument, NotFound, Unauthenticated
from fuzzball_core.orchestrate import oidc_schemas as schema
from fuzzball_core.orchestrate.service import SqlOrchestrateService
from fuzzball_core.service.oidc import (
    GRANT_DEVICE,
    GRANT_PASSWORD,
    GRANT_REFRESH,
    GRANT_TYPES,
    REALM_PATH,
    OAuthError,
    OidcIssuer,
)

DISCOVERY_PATH = f"{REALM_PATH}/.well-known/openid-configuration"
CERTS_PATH = f"{REALM_PATH}/protocol/openid-connect/certs"
TOKEN_PATH = f"{REALM_PATH}/protocol/openid-connect/token"
DEVICE_AUTHORIZATION_PATH = f"{REALM_PATH}/protocol/openid-connect/auth/device"
LOGOUT_PATH = f"{REALM_PATH}/protocol/openid-connect/logout"
APPROVAL_PATH = f"{REALM_PATH}/device"
PUBLIC_PATHS = (
    DISCOVERY_PATH,
    CERTS_PATH,
    TOKEN_PATH,
    DEVICE_AUTHORIZATION_PATH,
    LOGOUT_PATH,
    APPROVAL_PATH,
)

FORM_TYPE = "application/x-www-form-urlencoded"
#: token answers must not be cached (RFC 6749 5.1)
NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}
#: the approval page: nothing loaded from elsewhere, never framed (no clickjacking of the
#: approve button), forms posted only back here
PAGE_HEADERS = {
    **NO_STORE,
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}


def oidc_routes(service: SqlOrchestrateService) -> ExtraRoutes:
    """The routes of ``service``'s issuer (``server.build`` gives it one), all public."""
    issuer = service.oidc
    if issuer is None:
        raise FailedPrecondition("this Orchestrate service was built without its OIDC issuer")
    return ExtraRoutes(
        add=lambda app, _base, _principal_of: add_oidc_routes(app, issuer),
        public_paths=PUBLIC_PATHS,
    )


def add_oidc_routes(app: web.Application, issuer: OidcIssuer) -> None:
    """Add the issuer's routes at the gateway's root (they are not under ``/v3``)."""

    def issuer_url(request: web.Request) -> str:
        return issuer.issuer_url(f"{request.scheme}://{request.host}")

    @documented(schema.DISCOVERY)
    async def discovery(request: web.Request) -> web.Response:
        return web.json_response(issuer.discovery(issuer_url(request)))

    @documented(schema.CERTS)
    async def certs(request: web.Request) -> web.Response:
        return web.json_response(issuer.jwks())

    @documented(schema.TOKEN)
    async def token(request: web.Request) -> web.Response:
        return await _oauth(request, lambda form: _token_grant(issuer, request, form))

    @documented(schema.DEVICE_AUTHORIZATION)
    async def device_authorization(request: web.Request) -> web.Response:
        def grant(form: dict[str, str]) -> dict[str, Any]:
            return issuer.device_authorization(
                form.get("client_id", ""), form.get("scope", ""), issuer=issuer_url(request)
            ).body()

        return await _oauth(request, grant)

    @documented(schema.LOGOUT)
    async def logout(request: web.Request) -> web.Response:
        def end(form: dict[str, str]) -> dict[str, Any]:
            issuer.logout(form.get("client_id", ""), form.get("refresh_token", ""))
            return {}

        return await _oauth(request, end)

    @documented(schema.APPROVAL_PAGE)
    async def approval_page(request: web.Request) -> web.Response:
        return _page(_approval_form(request.query.get("user_code", "")))

    @documented(schema.DECIDE)
    async def approve(request: web.Request) -> web.Response:
        return await _decide(issuer, request)

    app.router.add_get(DISCOVERY_PATH, discovery)
    app.router.add_get(CERTS_PATH, certs)
    app.router.add_post(TOKEN_PATH, token)
    app.router.add_post(DEVICE_AUTHORIZATION_PATH, device_authorization)
    app.router.add_post(LOGOUT_PATH, logout)
    app.router.add_get(APPROVAL_PATH, approval_page)
    app.router.add_post(APPROVAL_PATH, approve)


def _token_grant(issuer: OidcIssuer, request: web.Request, form: dict[str, str]) -> dict[str, Any]:
    grant_type = form.get("grant_type", "")
    client_id = form.get("client_id", "")
    scope = form.get("scope", "")
    url = issuer.issuer_url(f"{request.scheme}://{request.host}")
    if grant_type == GRANT_PASSWORD:
        tokens = issuer.password_grant(
            client_id,
            form.get("username", ""),
            form.get("password", ""),
            scope,
            issuer=url,
            source=request.remote or "",
        )
    elif grant_type == GRANT_REFRESH:
        tokens = issuer.refresh_grant(client_id, form.get("refresh_token", ""), scope, issuer=url)
    elif grant_type == GRANT_DEVICE:
        tokens = issuer.device_grant(client_id, form.get("device_code", ""), issuer=url)
    elif not grant_type:
        raise OAuthError("invalid_request", "grant_type is required")
    else:
        raise OAuthError(
            "unsupported_grant_type",
            f"grant_type {grant_type!r} is not supported (supported: {', '.join(GRANT_TYPES)})",
        )
    return tokens.body()


async def _form(request: web.Request) -> dict[str, str]:
    """The request's form fields; OAuthError ``invalid_request`` for another body type, a
    field given twice (RFC 6749 3.1) or one that is not text."""
    if request.content_type != FORM_TYPE:
        raise OAuthError("invalid_request", f"the body must be {FORM_TYPE}")
    try:
        posted = await read_form(request)
    except InvalidArgument as exc:
        raise OAuthError("invalid_request", exc.message) from None
    form: dict[str, str] = {}
    for key in posted:
        values = posted.getall(key)
        if len(values) > 1:
            raise OAuthError("invalid_request", f"{key}: given more than once")
        if not isinstance(values[0], str):
            raise OAuthError("invalid_request", f"{key}: must be a text field")
        form[key] = values[0]
    return form


async def _oauth(
    request: web.Request, call: Callable[[dict[str, str]], dict[str, Any]]
) -> web.Response:
    """Run ``call`` on the request's form in a worker thread (password hashes and the store
    would hold up the event loop), answering its body or its OAuth error."""
    try:
        form = await _form(request)
        body = await asyncio.to_thread(call, form)
    except OAuthError as exc:
        return web.json_response(exc.body(), status=exc.status, headers=NO_STORE)
    return web.json_response(body, headers=NO_STORE)


async def _decide(issuer: OidcIssuer, request: web.Request) -> web.Response:
    try:
        form = await _form(request)
    except OAuthError as exc:
        return _page(_message(exc.description), status=400)
    code = form.get("user_code", "")
    email = form.get("username", "")
    action = form.get("action", "")
    if action not in ("approve", "deny"):
        return _page(_approval_form(code, email, "Choose Approve or Deny."), status=400)
    try:
        decided = await asyncio.to_thread(
            issuer.decide_device,
            code,
            email,
            form.get("password", ""),
            approve=action == "approve",
            source=request.remote or "",
        )
    except NotFound as exc:
        return _page(_approval_form(code, email, str(exc)), status=404)
    except Unauthenticated as exc:
        return _page(_approval_form(code, email, str(exc)), status=401)
    if action == "approve":
        text = (
            f"Code {decided} approved: the device is signed in as {email}. You may close this page."
        )
    else:
        text = f"Code {decided} denied: the device was not signed in."
    return _page(_message(text))


def _approval_form(code: str, email: str = "", problem: str = "") -> str:
    alert = f'<p role="alert" class="problem">{escape(problem)}</p>' if problem else ""
    return f"""<h1>Sign in a device to Fuzzball</h1>
<p>Enter the code the device shows, then sign in to approve (or deny) it.</p>
{alert}
<form method="post" action="">
<p><label for="user_code">Code</label>
<input id="user_code" name="user_code" value="{escape(code)}" required autocomplete="off"></p>
<p><label for="username">Email</label>
<input id="username" name="username" type="email" value="{escape(email)}" required
 autocomplete="username"></p>
<p><label for="password">Password</label>
<input id="password" name="password" type="password" required
 autocomplete="current-password"></p>
<p><button name="action" value="approve">Approve</button>
<button name="action" value="deny">Deny</button></p>
</form>"""


def _message(text: str) -> str:
    return f'<h1>Sign in a device to Fuzzball</h1>\n<p role="status">{escape(text)}</p>'


def _page(body: str, *, status: int = 200) -> web.Response:
    document = f"""<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>Fuzzball device sign-in</title>
<style>body{{font-family:sans-serif;max-width:32em;margin:2em auto}}
.problem{{color:#a00}}</style></head>
<body>
{body}
</body>
</html>
"""
    return web.Response(
        text=document, status=status, content_type="text/html", headers=PAGE_HEADERS
    )
