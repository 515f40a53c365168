"""Password login at a context's OIDC server (the OAuth2 password grant of the real CLI).

``POST {oidcServerURL}/protocol/openid-connect/token`` with ``client_id=fuzzball-cli``,
``grant_type=password``, ``username``, ``password`` and ``scope=offline_access`` answers with an
``access_token``. The password is sent only there and never appears in an error message.
"""

from __future__ import annotations

import httpx

from fuzzball_core.errors import FuzzballError, Unauthenticated, Unavailable

CLIENT_ID = "fuzzball-cli"


def token_endpoint(oidc_server_url: str) -> str:
    """The realm's token endpoint."""
    return f"{oidc_server_url.rstrip('/')}/protocol/openid-connect/token"


def password_grant(
    oidc_server_url: str, username: str, password: str, *, timeout: float = 30.0
) -> str:
    """The access token for ``username``; ``Unauthenticated`` when the server refuses."""
    url = token_endpoint(oidc_server_url)
    form = {
        "client_id": CLIENT_ID,
        "grant_type": "password",
        "username": username,
        "password": password,
        "scope": "offline_access",
    }
    try:
        response = httpx.post(url, data=form, timeout=timeout)
    except httpx.HTTPError as exc:
        raise Unavailable(f"cannot reach the login server {url}: {exc}") from None
    try:
        body = response.json()
    except ValueError:
        body = {}
    if response.status_code >= 400 or not isinstance(body, dict):
        reason = (
            body.get("error_description") or body.get("error") if isinstance(body, dict) else None
        )
        raise Unauthenticated(
            f"login as {username!r} at {url} failed: {reason or f'HTTP {response.status_code}'}"
        )
    token = body.get("access_token")
    if not isinstance(token, str) or not token:
        raise FuzzballError(f"login server {url} answered without an access_token")
    return token
