"""A context's sign-in: the account it works in, that account's API token, and renewing it.

After a login at the OIDC server, the access token is exchanged for an account's API token
(``GET {api}/accounts/{id}/token``): the context's ``currentaccountid`` when it is one of the
user's accounts, else the user's personal account (named after their email), else their
first. The context keeps the API token (``auth.credentials.token``), the refresh token
(``auth.credentials.refreshToken``), ``currentaccountid`` and the ``accounts`` list.

When the API answers 401 saying the token expired, :class:`RenewingBearer` renews it once,
transparently: the refresh token gets a new access token (and its successor), which is
exchanged again for the same account, and the context file is saved.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import httpx
import jwt

from fuzzball_core.cli.contexts import Context, ContextsFile
from fuzzball_core.cli.oidc_login import UPDATE_PASSWORD, OidcTokens, refresh_grant
from fuzzball_core.client import FuzzballClient
from fuzzball_core.errors import FailedPrecondition, NotFound, Unauthenticated


@dataclass(frozen=True)
class SignedIn:
    """Where a login left the context, and what to tell the user."""

    account_id: str
    account_name: str
    email: str
    notes: tuple[str, ...] = ()


def token_email(access_token: str) -> str:
    """The ``email`` claim of an access token, read for display and for choosing the
    personal account only: the server verifies the token, the client does not need to."""
    try:
        claims = jwt.decode(access_token, options={"verify_signature": False})
    except jwt.InvalidTokenError:
        return ""
    email = claims.get("email") or claims.get("preferred_username")
    return email if isinstance(email, str) else ""


def _chosen(accounts: list[dict[str, Any]], current: str, email: str) -> tuple[dict, str]:
    if not accounts:
        raise NotFound("the user has no account to work in: ask an organization owner")
    for account in accounts:
        if current and account.get("id") == current:
            return account, ""
    personal = next((a for a in accounts if email and a.get("name") == email), accounts[0])
    note = (
        f"currentaccountid {current} is not one of your accounts; using {personal.get('name')}"
        if current
        else ""
    )
    return personal, note


def complete_login(context: Context, tokens: OidcTokens) -> SignedIn:
    """Exchange ``tokens``' access token for an account's API token and keep it (with the
    refresh token and the accounts) in ``context``; the caller saves the file."""
    email = token_email(tokens.access_token)
    with FuzzballClient.connect(
        context.address, tokens.access_token, verify=context.verify()
    ) as api:
        listed = api.call_json("GET", "/accounts").get("accounts") or []
        accounts = [a for a in listed if isinstance(a, dict)]
        account, note = _chosen(accounts, context.current_account_id, email)
        account_id = str(account["id"])
        context.token = api.account_token(account_id)
    context.refresh_token = tokens.refresh_token
    context.current_account_id = account_id
    context.accounts = [
        {"accountid": str(a.get("id", "")), "accountalias": str(a.get("name", ""))}
        for a in accounts
    ]
    return SignedIn(account_id, str(account.get("name", "")), email, (note,) if note else ())


def must_choose_password(tokens: OidcTokens) -> bool:
    """Whether the server asks the user to choose a new password before anything else (an
    owner reset it): until then no account's token is given."""
    return UPDATE_PASSWORD in tokens.required_actions


def choose_password(context: Context, tokens: OidcTokens, current: str, new: str) -> None:
    """Change the user's password with the login's access token (``POST /profile/password``),
    as a login whose password was reset must before :func:`complete_login`."""
    with FuzzballClient.connect(
        context.address, tokens.access_token, verify=context.verify()
    ) as api:
        api.call_json(
            "POST", "/profile/password", body={"currentPassword": current, "newPassword": new}
        )


def renew(contexts: ContextsFile, context: Context) -> str:
    """A new API token for the context's account from its refresh token (saved with the
    refresh token's successor); Unauthenticated saying to log in again when it cannot."""
    if not context.refresh_token or not context.oidc_server_url:
        raise Unauthenticated(
            f"the token of context {context.name!r} expired and it holds no refresh token:"
            " run 'fuzzball context login'"
        )
    if not context.current_account_id:
        raise FailedPrecondition(f"context {context.name!r} has no currentaccountid")
    try:
        tokens = refresh_grant(
            context.oidc_server_url, context.refresh_token, verify=context.verify()
        )
    except Unauthenticated as exc:
        raise Unauthenticated(
            f"the token of context {context.name!r} expired and could not be renewed"
            f" ({exc.message}): run 'fuzzball context login'"
        ) from None
    with FuzzballClient.connect(
        context.address, tokens.access_token, verify=context.verify()
    ) as api:
        context.token = api.account_token(context.current_account_id)
    context.refresh_token = tokens.refresh_token or context.refresh_token
    contexts.save()
    return context.token


def _expired(response: httpx.Response) -> bool:
    """Whether a 401 says the token expired (rather than being unknown or revoked)."""
    try:
        body = response.json()
    except ValueError:
        return False
    return isinstance(body, dict) and "expired" in str(body.get("message", ""))


class RenewingBearer(httpx.Auth):
    """Sends the context's API token; on a 401 saying it expired, renews it (``renew``)
    and sends the request once more.

    Only a 401's (short) body is read here: any other answer reaches the caller unread, so
    that a followed log streams as it comes."""

    def __init__(self, token: str, renew: Callable[[], str]) -> None:
        self.token = token
        self._renew = renew

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self.token}"
        response = yield request
        if response.status_code != 401:
            return
        response.read()
        if _expired(response):
            self.token = self._renew()
            request.headers["Authorization"] = f"Bearer {self.token}"
            yield request


def renewing_auth(contexts: ContextsFile, context: Context) -> RenewingBearer | None:
    """The renewing auth of a context that can renew (one with a refresh token); None for
    one holding only a token."""
    if not context.token or not context.refresh_token or not context.oidc_server_url:
        return None
    return RenewingBearer(context.token, lambda: renew(contexts, context))
