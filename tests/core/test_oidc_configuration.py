"""The OIDC issuer as the configuration describes it: ``accounts.oidc-issuer`` (pinned, or
each request's own root) and the token lifetimes; its signing key in the data directory."""

from __future__ import annotations

import time

import jwt
import pytest

from fuzzball_core.config import parse_config
from fuzzball_core.errors import Unauthenticated
from fuzzball_core.service.accounts import Accounts
from fuzzball_core.service.audit import AuditLog
from fuzzball_core.service.identity import Identity
from fuzzball_core.service.oidc import AUDIENCE, OidcIssuer, configured_issuer, signing_key_path
from fuzzball_core.store.database import connect, migrate, session_factory

PINNED = "https://login.example.org/auth/realms/fuzzball"


def issuer_of(tmp_path, accounts: dict | None = None) -> OidcIssuer:
    config = parse_config({"data-dir": str(tmp_path / "data"), "accounts": accounts or {}})
    database = connect(config.database_url)
    migrate(database)
    sessions = session_factory(database)
    identity = Identity(sessions, Accounts(sessions), AuditLog(sessions))
    return configured_issuer(config, sessions, identity)


def signed(issuer: OidcIssuer, iss: str) -> str:
    """A token signed with ``issuer``'s own key, claiming to be from ``iss``."""
    claims = {"iss": iss, "sub": "user-1", "aud": AUDIENCE, "exp": int(time.time()) + 60}
    return jwt.encode(claims, issuer.key.private_key, "RS256")


def test_the_configured_lifetimes_and_issuer_are_used(tmp_path):
    issuer = issuer_of(
        tmp_path,
        {"oidc-issuer": PINNED, "access-token-lifetime": "10m", "refresh-token-lifetime": "168h"},
    )
    assert issuer.issuer == PINNED
    assert issuer.access_token_lifetime == 600
    assert issuer.refresh_token_lifetime == 7 * 24 * 3600
    assert issuer.issuer_url("http://127.0.0.1:8080") == PINNED


def test_without_one_the_issuer_is_each_requests_own_root(tmp_path):
    issuer = issuer_of(tmp_path)
    assert (
        issuer.issuer_url("https://10.0.0.5:8080") == "https://10.0.0.5:8080/auth/realms/fuzzball"
    )


def test_the_signing_key_lives_in_the_data_directory_owner_only(tmp_path):
    issuer = issuer_of(tmp_path)
    path = signing_key_path(parse_config({"data-dir": str(tmp_path / "data")}))
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    assert issuer_of(tmp_path).key.kid == issuer.key.kid


def test_a_pinned_issuer_accepts_its_own_iss(tmp_path):
    issuer = issuer_of(tmp_path, {"oidc-issuer": PINNED})
    assert issuer.verify(signed(issuer, PINNED)) == "user-1"


def test_a_pinned_issuer_refuses_another_iss_even_under_its_key(tmp_path):
    issuer = issuer_of(tmp_path, {"oidc-issuer": PINNED})
    with pytest.raises(Unauthenticated, match="another issuer"):
        issuer.verify(signed(issuer, "https://elsewhere.example.org/auth/realms/fuzzball"))


def test_an_unpinned_issuer_refuses_another_realm(tmp_path):
    issuer = issuer_of(tmp_path)
    with pytest.raises(Unauthenticated, match="another issuer"):
        issuer.verify(signed(issuer, "https://login.example.org/auth/realms/other"))


def test_a_token_for_another_audience_is_refused(tmp_path):
    issuer = issuer_of(tmp_path)
    claims = {"iss": PINNED, "sub": "u", "aud": "someone-else", "exp": int(time.time()) + 60}
    with pytest.raises(Unauthenticated, match="not valid"):
        issuer.verify(jwt.encode(claims, issuer.key.private_key, "RS256"))


def test_a_pinned_issuer_may_be_any_url(tmp_path):
    proxied = "https://sso.example.org/fuzzball"
    issuer = issuer_of(tmp_path, {"oidc-issuer": proxied})
    assert issuer.verify(signed(issuer, proxied)) == "user-1"
