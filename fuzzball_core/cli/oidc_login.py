"""Login at a context's OIDC server, as the real CLI does it (``reference/cli-config.md``).

* the OAuth2 password grant: ``POST {oidcServerURL}/protocol/openid-connect/token`` with
  ``client_id=fuzzball-cli``, ``grant_type=password``, ``username``, ``password`` and
  ``scope=offline_access``;
* the device authorization grant (RFC 8628): ``POST {oidcServerURL}/protocol/openid-connect/
  auth/device`` gives a code a person approves in a browser, while the token endpoint is
  polled (``authorization_pending``; ``slow_down`` adds five seconds to the interval);
* the refresh grant, which renews an access token with the refresh token the first two gave.

The password is sent only to the token endpoint and never appears in an error message.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from fuzzball_core.errors import FuzzballError, PermissionDenied, Unauthenticated, Unavailable

CLIENT_ID = "fuzzball-cli"
SCOPE = "offline_access"
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
#: what RFC 8628 3.5 says a client adds to its interval on ``slow_down``
SLOW_DOWN_STEP = 5
#: the required action of a user whose password an owner reset
UPDATE_PASSWORD = "UPDATE_PASSWORD"
DEFAULT_TIMEOUT = 30.0

Verify = ssl.SSLContext | bool


def token_endpoint(oidc_server_url: str) -> str:
    """The realm's token endpoint."""
    return f"{oidc_server_url.rstrip('/')}/protocol/openid-connect/token"


def device_endpoint(oidc_server_url: str) -> str:
    """The realm's device authorization endpoint."""
    return f"{oidc_server_url.rstrip('/')}/protocol/openid-connect/auth/device"


@dataclass(frozen=True)
class OidcTokens:
    """What a grant gave: the access token, the refresh token (empty without one), and what
    the server asks the user to do first (``UPDATE_PASSWORD``)."""

    access_token: str
    refresh_token: str = ""
    required_actions: tuple[str, ...] = ()


@dataclass(frozen=True)
class DeviceLogin:
    """A started device login: the code to show, where to approve it, how often to poll."""

    device_code: str
    user_code: str
    verification_uri: str
    verification_uri_complete: str
    interval: int
    expires_in: int


class OAuthRefusal(Unauthenticated):
    """The OIDC server answered with an OAuth error (``error`` is its code)."""

    def __init__(self, message: str, error: str) -> None:
        super().__init__(message)
        self.error = error


def _post(url: str, form: dict[str, str], *, verify: Verify, timeout: float) -> dict[str, Any]:
    """POST ``form`` to ``url``; the JSON body, or OAuthRefusal with the server's reason."""
    try:
        response = httpx.post(url, data=form, timeout=timeout, verify=verify)
    except httpx.HTTPError as exc:
        raise Unavailable(f"cannot reach the login server {url}: {exc}") from None
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.status_code >= 400 or not isinstance(body, dict):
        error = body.get("error") if isinstance(body, dict) else None
        reason = body.get("error_description") if isinstance(body, dict) else None
        raise OAuthRefusal(
            f"{url}: {reason or error or f'HTTP {response.status_code}'}", str(error or "")
        )
    return body


def _tokens(url: str, body: dict[str, Any]) -> OidcTokens:
    access = body.get("access_token")
    if not isinstance(access, str) or not access:
        raise FuzzballError(f"login server {url} answered without an access_token")
    refresh = body.get("refresh_token")
    actions = body.get("required_actions")
    return OidcTokens(
        access,
        refresh if isinstance(refresh, str) else "",
        tuple(str(a) for a in actions) if isinstance(actions, list) else (),
    )


def password_grant(
    oidc_server_url: str,
    username: str,
    password: str,
    *,
    verify: Verify = True,
    timeout: float = DEFAULT_TIMEOUT,
) -> OidcTokens:
    """Tokens for ``username``; Unauthenticated naming the server's reason when refused."""
    url = token_endpoint(oidc_server_url)
    form = {
        "client_id": CLIENT_ID,
        "grant_type": "password",
        "username": username,
        "password": password,
        "scope": SCOPE,
    }
    try:
        return _tokens(url, _post(url, form, verify=verify, timeout=timeout))
    except OAuthRefusal as exc:
        raise Unauthenticated(f"login as {username!r} at {exc.message}") from None


def refresh_grant(
    oidc_server_url: str,
    refresh_token: str,
    *,
    verify: Verify = True,
    timeout: float = DEFAULT_TIMEOUT,
) -> OidcTokens:
    """New tokens for a refresh token (the server rotates it: keep the new one)."""
    url = token_endpoint(oidc_server_url)
    form = {"client_id": CLIENT_ID, "grant_type": "refresh_token", "refresh_token": refresh_token}
    return _tokens(url, _post(url, form, verify=verify, timeout=timeout))


def start_device_login(
    oidc_server_url: str, *, verify: Verify = True, timeout: float = DEFAULT_TIMEOUT
) -> DeviceLogin:
    """Ask for a device code and the user code a person approves."""
    url = device_endpoint(oidc_server_url)
    body = _post(url, {"client_id": CLIENT_ID, "scope": SCOPE}, verify=verify, timeout=timeout)
    try:
        uri = str(body["verification_uri"])
        return DeviceLogin(
            device_code=str(body["device_code"]),
            user_code=str(body["user_code"]),
            verification_uri=uri,
            verification_uri_complete=str(body.get("verification_uri_complete") or uri),
            interval=int(body.get("interval") or 5),
            expires_in=int(body["expires_in"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise FuzzballError(f"login server {url} answered without {exc}") from None


def finish_device_login(
    oidc_server_url: str,
    device: DeviceLogin,
    *,
    verify: Verify = True,
    timeout: float = DEFAULT_TIMEOUT,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> OidcTokens:
    """Poll the token endpoint until the user code is approved (the tokens), denied
    (PermissionDenied) or expired (Unauthenticated)."""
    url = token_endpoint(oidc_server_url)
    form = {"client_id": CLIENT_ID, "grant_type": DEVICE_GRANT, "device_code": device.device_code}
    interval = device.interval
    deadline = clock() + device.expires_in
    while True:
        sleep(interval)
        try:
            return _tokens(url, _post(url, form, verify=verify, timeout=timeout))
        except OAuthRefusal as exc:
            if exc.error == "slow_down":
                interval += SLOW_DOWN_STEP
            elif exc.error == "access_denied":
                raise PermissionDenied(
                    f"the login with code {device.user_code} was denied"
                ) from None
            elif exc.error == "expired_token" or (
                exc.error == "authorization_pending" and clock() >= deadline
            ):
                raise Unauthenticated(
                    f"code {device.user_code} expired before it was approved; log in again"
                ) from None
            elif exc.error != "authorization_pending":
                raise
