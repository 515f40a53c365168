"""What a client written for Fuzzball's API does, with a plain HTTP client (httpx, none of
this project's client code): log in with the password grant at the issuer's token endpoint
(``client_id=fuzzball-cli``, ``scope=offline_access``), then exchange the access token for an
account's API token at ``GET /v3/accounts/{id}/token``, and call the API with it.

Each step is a function of its own, so that later steps (secrets, workflows) can follow them.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx
import pytest
from support.oidc_stack import PASSWORD

EMAIL = "ada@example.org"


@dataclass(frozen=True)
class SignedIn:
    """A client holding an account's API token, as after the first two steps."""

    api: str  # the versioned base, https://host/v3
    account_id: str
    token: str
    refresh_token: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def password_login(issuer_url: str, email: str, password: str) -> dict:
    """Step 1: the OAuth2 password grant, exactly as Fuzzball's clients send it."""
    reply = httpx.post(
        f"{issuer_url}/protocol/openid-connect/token",
        data={
            "client_id": "fuzzball-cli",
            "grant_type": "password",
            "username": email,
            "password": password,
            "scope": "offline_access",
        },
    )
    assert reply.status_code == 200, reply.text
    return reply.json()


def select_account(api: str, access_token: str, account_id: str | None = None) -> tuple[str, str]:
    """Step 2: the account to work in (the first the user has, unless one is named) and its
    API token from ``GET /accounts/{id}/token``."""
    bearer = {"Authorization": f"Bearer {access_token}"}
    if account_id is None:
        accounts = httpx.get(f"{api}/accounts", headers=bearer)
        assert accounts.status_code == 200, accounts.text
        account_id = accounts.json()["accounts"][0]["id"]
    reply = httpx.get(f"{api}/accounts/{account_id}/token", headers=bearer)
    assert reply.status_code == 200, reply.text
    return account_id, reply.json()["token"]


def sign_in(root: str, issuer_url: str, email: str, password: str) -> SignedIn:
    """Steps 1 and 2."""
    tokens = password_login(issuer_url, email, password)
    api = f"{root}/v3"
    account_id, token = select_account(api, tokens["access_token"])
    return SignedIn(api, account_id, token, tokens["refresh_token"])


@pytest.fixture
def client(oidc) -> SignedIn:
    oidc.organization("lab", EMAIL)
    return sign_in(oidc.url, oidc.issuer_url, EMAIL, PASSWORD)


def test_the_password_grant_gives_an_access_and_a_refresh_token(oidc):
    oidc.organization("lab", EMAIL)
    tokens = password_login(oidc.issuer_url, EMAIL, PASSWORD)
    assert tokens["token_type"] == "Bearer"
    assert tokens["access_token"].count(".") == 2
    assert tokens["refresh_token"]


def test_the_access_token_is_exchanged_for_the_accounts_api_token(oidc, client):
    who = oidc.service.authenticate(client.token)
    assert who.account_id == client.account_id
    assert who.email == EMAIL
    assert who.credential == "api"


def test_the_api_token_calls_the_api(client):
    reply = httpx.get(f"{client.api}/workflows", headers=client.headers)
    assert reply.status_code == 200, reply.text
    assert reply.json().get("workflows", []) == []


def test_another_users_account_cannot_be_selected(oidc, client):
    oidc.organization("other", "eve@example.org")
    eve = password_login(oidc.issuer_url, "eve@example.org", PASSWORD)
    bearer = {"Authorization": f"Bearer {eve['access_token']}"}
    reply = httpx.get(f"{client.api}/accounts/{client.account_id}/token", headers=bearer)
    assert reply.status_code == 404
