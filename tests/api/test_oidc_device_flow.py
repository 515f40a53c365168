"""The device authorization grant (RFC 8628) of the OIDC issuer, and its approval page.

A client asks for a device code, a person approves (or denies) the user code on the page
after signing in, and the client polls the token endpoint meanwhile.
"""

from __future__ import annotations

import re

import httpx
import pytest
from support.oidc_stack import PASSWORD, POLL_INTERVAL

from fuzzball_core.service.oidc import CLIENT_ID, GRANT_DEVICE


@pytest.fixture
def ada(oidc):
    return oidc.organization("lab", "ada@example.org")


@pytest.fixture
def device(oidc) -> dict:
    form = {"client_id": CLIENT_ID, "scope": "offline_access"}
    reply = httpx.post(oidc.device_url, data=form)
    assert reply.status_code == 200, reply.text
    return reply.json()


def poll(oidc, device: dict) -> httpx.Response:
    form = {
        "client_id": CLIENT_ID,
        "grant_type": GRANT_DEVICE,
        "device_code": device["device_code"],
    }
    return httpx.post(oidc.token_url, data=form)


def decide(
    oidc, user_code: str, action: str = "approve", password: str = PASSWORD
) -> httpx.Response:
    form = {
        "user_code": user_code,
        "username": "ada@example.org",
        "password": password,
        "action": action,
    }
    return httpx.post(oidc.approval_url, data=form)


def test_the_device_authorization_names_the_codes_and_the_page(oidc, device):
    assert re.fullmatch(r"[B-Z]{4}-[B-Z]{4}", device["user_code"])
    assert device["verification_uri"] == oidc.approval_url
    assert device["verification_uri_complete"] == (
        f"{oidc.approval_url}?user_code={device['user_code']}"
    )
    assert device["interval"] == POLL_INTERVAL
    assert device["expires_in"] == 600


def test_polling_before_approval_is_authorization_pending(oidc, device):
    reply = poll(oidc, device)
    assert reply.status_code == 400
    assert reply.json()["error"] == "authorization_pending"


def test_polling_faster_than_the_interval_is_slow_down(oidc, device):
    poll(oidc, device)
    oidc.clock.advance(POLL_INTERVAL - 1)
    assert poll(oidc, device).json()["error"] == "slow_down"
    oidc.clock.advance(POLL_INTERVAL)
    assert poll(oidc, device).json()["error"] == "authorization_pending"


def test_an_approved_code_gives_the_user_tokens_once(oidc, ada, device):
    page = decide(oidc, device["user_code"])
    assert page.status_code == 200
    assert "approved" in page.text
    reply = poll(oidc, device)
    assert reply.status_code == 200, reply.text
    tokens = reply.json()
    assert tokens["refresh_token"]
    assert oidc.service.authenticate(tokens["access_token"]).user_id == ada.id
    assert poll(oidc, device).json()["error"] == "invalid_grant"


def test_the_code_may_be_typed_in_lower_case_without_the_dash(oidc, ada, device):
    typed = device["user_code"].replace("-", " ").lower()
    assert decide(oidc, typed).status_code == 200
    assert poll(oidc, device).status_code == 200


def test_a_denied_code_is_access_denied(oidc, ada, device):
    page = decide(oidc, device["user_code"], "deny")
    assert "denied" in page.text
    assert poll(oidc, device).json()["error"] == "access_denied"


def test_an_expired_code_is_expired_token(oidc, ada, device):
    oidc.clock.advance(device["expires_in"] + 1)
    assert poll(oidc, device).json()["error"] == "expired_token"


def test_an_expired_code_cannot_be_approved(oidc, ada, device):
    oidc.clock.advance(device["expires_in"] + 1)
    page = decide(oidc, device["user_code"])
    assert page.status_code == 404
    assert "no sign-in request is waiting" in page.text


def test_a_wrong_password_on_the_page_approves_nothing(oidc, ada, device):
    page = decide(oidc, device["user_code"], password="Wrong-pass-99!")
    assert page.status_code == 401
    assert "invalid email or password" in page.text
    assert "Wrong-pass-99!" not in page.text
    assert poll(oidc, device).json()["error"] == "authorization_pending"


def test_wrong_passwords_on_the_page_count_toward_the_lockout(oidc, ada, device):
    for _ in range(5):
        decide(oidc, device["user_code"], password="Wrong-pass-99!")
    page = decide(oidc, device["user_code"])
    assert page.status_code == 401
    assert "locked out" in page.text


def test_an_unknown_device_code_is_invalid_grant(oidc):
    assert poll(oidc, {"device_code": "made-up"}).json()["error"] == "invalid_grant"


def test_the_page_is_a_labelled_form_that_cannot_be_framed(oidc, device):
    reply = httpx.get(oidc.approval_url, params={"user_code": device["user_code"]})
    assert reply.status_code == 200
    assert reply.headers["Content-Type"].startswith("text/html")
    assert reply.headers["X-Frame-Options"] == "DENY"
    assert "frame-ancestors 'none'" in reply.headers["Content-Security-Policy"]
    for field in ("user_code", "username", "password"):
        assert f'<label for="{field}">' in reply.text
    assert f'value="{device["user_code"]}"' in reply.text
    assert 'method="post"' in reply.text


def test_the_page_escapes_what_it_echoes(oidc):
    reply = httpx.get(oidc.approval_url, params={"user_code": '"><script>alert(1)</script>'})
    assert "<script>" not in reply.text
    assert "&lt;script&gt;" in reply.text


def test_a_post_without_a_choice_asks_for_one(oidc, device):
    form = {"user_code": device["user_code"], "username": "ada@example.org", "password": "x"}
    page = httpx.post(oidc.approval_url, data=form)
    assert page.status_code == 400
    assert "Choose Approve or Deny" in page.text


def test_an_unknown_client_gets_no_device_code(oidc):
    reply = httpx.post(oidc.device_url, data={"client_id": "other"})
    assert reply.status_code == 401
    assert reply.json()["error"] == "invalid_client"


def test_grants_are_forgotten_an_hour_after_they_expire(oidc, device):
    oidc.clock.advance(device["expires_in"] + 3601)
    httpx.post(oidc.device_url, data={"client_id": CLIENT_ID})  # any new grant prunes
    assert poll(oidc, device).json()["error"] == "invalid_grant"
