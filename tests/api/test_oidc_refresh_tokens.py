"""Refresh tokens of the OIDC issuer: given for offline_access, rotated on every use, a
replayed one ends every session of its user, expired ones refused, logout revokes."""

from __future__ import annotations

import httpx
import pytest
from support.oidc_stack import PASSWORD

from fuzzball_core.service.oidc import CLIENT_ID


@pytest.fixture
def ada(oidc):
    return oidc.organization("lab", "ada@example.org")


def sign_in(oidc) -> dict:
    return httpx.post(oidc.token_url, data=oidc.password_form("ada@example.org")).json()


def refresh(oidc, refresh_token: str, **extra: str) -> httpx.Response:
    form = {
        "client_id": CLIENT_ID,
        "grant_type": "refresh_token",
        "refresh_token": refresh_token,
        **extra,
    }
    return httpx.post(oidc.token_url, data=form)


def test_a_refresh_token_gives_a_new_access_token_and_its_successor(oidc, ada):
    first = sign_in(oidc)
    reply = refresh(oidc, first["refresh_token"])
    assert reply.status_code == 200, reply.text
    renewed = reply.json()
    assert renewed["refresh_token"] != first["refresh_token"]
    assert oidc.service.authenticate(renewed["access_token"]).user_id == ada.id


def test_a_used_refresh_token_is_refused(oidc, ada):
    first = sign_in(oidc)
    refresh(oidc, first["refresh_token"])
    reply = refresh(oidc, first["refresh_token"])
    assert reply.status_code == 400
    assert reply.json()["error"] == "invalid_grant"
    assert "already used" in reply.json()["error_description"]


def test_a_replayed_refresh_token_revokes_its_successor_too(oidc, ada):
    first = sign_in(oidc)
    successor = refresh(oidc, first["refresh_token"]).json()["refresh_token"]
    refresh(oidc, first["refresh_token"])
    assert refresh(oidc, successor).json()["error"] == "invalid_grant"


def test_a_refresh_token_outlives_the_access_token(oidc, ada):
    first = sign_in(oidc)
    oidc.clock.advance(3600)
    assert refresh(oidc, first["refresh_token"]).status_code == 200


def test_an_expired_refresh_token_is_refused_saying_when(oidc, ada):
    first = sign_in(oidc)
    oidc.clock.advance(first["refresh_expires_in"] + 1)
    reply = refresh(oidc, first["refresh_token"])
    assert reply.json()["error"] == "invalid_grant"
    assert "expired at" in reply.json()["error_description"]


def test_an_unknown_refresh_token_is_invalid_grant(oidc):
    assert refresh(oidc, "made-up").json()["error"] == "invalid_grant"


def test_a_refresh_cannot_widen_the_scope(oidc, ada):
    first = httpx.post(
        oidc.token_url, data=oidc.password_form("ada@example.org", scope="offline_access")
    ).json()
    reply = refresh(oidc, first["refresh_token"], scope="offline_access openid")
    assert reply.json()["error"] == "invalid_scope"


def test_the_refreshed_scope_is_the_one_granted(oidc, ada):
    first = sign_in(oidc)
    assert refresh(oidc, first["refresh_token"]).json()["scope"] == "offline_access"


def test_logout_revokes_the_refresh_token(oidc, ada):
    first = sign_in(oidc)
    form = {"client_id": CLIENT_ID, "refresh_token": first["refresh_token"]}
    reply = httpx.post(f"{oidc.issuer_url}/protocol/openid-connect/logout", data=form)
    assert reply.status_code == 200
    assert refresh(oidc, first["refresh_token"]).json()["error"] == "invalid_grant"


def test_a_removed_users_tokens_end_with_them(oidc, ada):
    owner = oidc.service.identity.login_principal(ada.id)
    member, password = oidc.service.identity.add_member(owner, "bob@example.org")
    form = oidc.password_form(member.email, password)
    tokens = httpx.post(oidc.token_url, data=form).json()
    oidc.service.identity.remove_member(owner, member.id)
    assert refresh(oidc, tokens["refresh_token"]).json()["error"] == "invalid_grant"
    bearer = {"Authorization": f"Bearer {tokens['access_token']}"}
    reply = httpx.get(f"{oidc.url}/v3/workflows", headers=bearer)
    assert reply.status_code == 401
    assert "no longer exists" in reply.json()["message"]


def test_a_password_change_ends_the_logins_made_before_it(oidc, ada):
    first = sign_in(oidc)
    who = oidc.service.identity.login_principal(ada.id)
    oidc.service.identity.change_password(
        who, current_password=PASSWORD, new_password="Another-Horse-7-Staple"
    )
    reply = refresh(oidc, first["refresh_token"])
    assert reply.json()["error"] == "invalid_grant"
    assert "log in again" in reply.json()["error_description"]
