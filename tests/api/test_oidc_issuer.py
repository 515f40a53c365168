"""Orchestrate's OIDC issuer: discovery, JWKS, the password grant and its access tokens.

Everything goes over real HTTP to the gateway (support.oidc_stack), as a client would.
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from contextlib import contextmanager

import grpc
import httpx
import jwt
import pytest
from support.live_api import start_servers
from support.oidc_stack import PASSWORD
from support.openapi_routes import document_adding, undescribed

from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.api.v1 import client_pb2_grpc as pb_grpc
from fuzzball_core.orchestrate.oidc_routes import PUBLIC_PATHS, oidc_routes
from fuzzball_core.service.audit import AuditQuery
from fuzzball_core.service.oidc import AUDIENCE, CLIENT_ID, SigningKey
from fuzzball_core.vocabulary import AuditAction, CredentialKind


@pytest.fixture
def ada(oidc):
    return oidc.organization("lab", "ada@example.org")


def token_of(oidc, email: str = "ada@example.org", **extra: str) -> dict:
    reply = httpx.post(oidc.token_url, data=oidc.password_form(email, **extra))
    assert reply.status_code == 200, reply.text
    return reply.json()


def test_discovery_names_the_issuer_and_its_endpoints(oidc):
    reply = httpx.get(f"{oidc.issuer_url}/.well-known/openid-configuration")
    assert reply.status_code == 200
    document = reply.json()
    endpoints = f"{oidc.issuer_url}/protocol/openid-connect"
    assert document["issuer"] == oidc.issuer_url
    assert document["token_endpoint"] == f"{endpoints}/token"
    assert document["jwks_uri"] == f"{endpoints}/certs"
    assert document["device_authorization_endpoint"] == f"{endpoints}/auth/device"
    assert set(document["grant_types_supported"]) == {
        "password",
        "refresh_token",
        "urn:ietf:params:oauth:grant-type:device_code",
    }


def test_an_access_token_verifies_with_the_published_jwks(oidc, ada):
    access = token_of(oidc)["access_token"]
    jwks = httpx.get(f"{oidc.issuer_url}/protocol/openid-connect/certs").json()
    (key,) = jwks["keys"]
    assert jwt.get_unverified_header(access)["kid"] == key["kid"]
    claims = jwt.decode(
        access,
        jwt.PyJWK(key).key,
        algorithms=["RS256"],
        audience=AUDIENCE,
        issuer=oidc.issuer_url,
    )
    assert claims["sub"] == ada.id
    assert claims["azp"] == CLIENT_ID
    assert claims["exp"] - claims["iat"] == 300
    assert claims["jti"]


def test_the_signing_key_is_kept_owner_only_and_reused(oidc, tmp_path):
    path = tmp_path / "oidc" / "signing-key.pem"
    assert path.stat().st_mode & 0o777 == 0o600
    assert SigningKey.load_or_create(path).kid == oidc.issuer.key.kid


def test_offline_access_gives_a_refresh_token(oidc, ada):
    tokens = token_of(oidc)
    assert tokens["token_type"] == "Bearer"
    assert tokens["expires_in"] == 300
    assert tokens["refresh_token"]
    assert tokens["scope"] == "offline_access"


def test_without_offline_access_there_is_no_refresh_token(oidc, ada):
    tokens = token_of(oidc, scope="openid")
    assert "refresh_token" not in tokens


def test_token_answers_are_not_cached(oidc, ada):
    reply = httpx.post(oidc.token_url, data=oidc.password_form("ada@example.org"))
    assert reply.headers["Cache-Control"] == "no-store"


def test_a_wrong_password_is_invalid_grant_without_the_password(oidc, ada):
    reply = httpx.post(oidc.token_url, data=oidc.password_form("ada@example.org", "Wrong-pass-99!"))
    assert reply.status_code == 400
    assert reply.json() == {
        "error": "invalid_grant",
        "error_description": "invalid email or password",
    }


def test_an_unknown_user_reads_as_a_wrong_password(oidc, ada):
    reply = httpx.post(oidc.token_url, data=oidc.password_form("nobody@example.org"))
    assert reply.json()["error_description"] == "invalid email or password"


def test_the_sixth_attempt_is_locked_out_even_with_the_right_password(oidc, ada):
    for _ in range(5):
        wrong = oidc.password_form("ada@example.org", "Wrong-pass-99!")
        assert httpx.post(oidc.token_url, data=wrong).status_code == 400
    reply = httpx.post(oidc.token_url, data=oidc.password_form("ada@example.org"))
    assert reply.status_code == 400
    assert reply.json()["error"] == "invalid_grant"
    assert "locked out" in reply.json()["error_description"]


def test_token_endpoint_sign_ins_are_audited_with_the_callers_address(oidc, ada):
    token_of(oidc)
    httpx.post(oidc.token_url, data=oidc.password_form("ada@example.org", "Wrong-pass-99!"))
    entries = oidc.service.audit.query(AuditQuery(organization_id=ada.organization_id)).entries
    seen = [(e.action, e.source) for e in entries if e.action.startswith("login")]
    assert (AuditAction.LOGIN, "127.0.0.1") in seen
    assert (AuditAction.LOGIN_FAILED, "127.0.0.1") in seen


def test_an_unknown_client_is_refused_as_invalid_client(oidc, ada):
    form = oidc.password_form("ada@example.org", client_id="someone-else")
    reply = httpx.post(oidc.token_url, data=form)
    assert reply.status_code == 401
    assert reply.json()["error"] == "invalid_client"


def test_an_unsupported_grant_type_is_named(oidc):
    form = {"client_id": CLIENT_ID, "grant_type": "client_credentials"}
    reply = httpx.post(oidc.token_url, data=form)
    assert reply.status_code == 400
    assert reply.json()["error"] == "unsupported_grant_type"
    assert "client_credentials" in reply.json()["error_description"]


def test_an_unknown_scope_is_invalid_scope(oidc, ada):
    reply = httpx.post(oidc.token_url, data=oidc.password_form("ada@example.org", scope="admin"))
    assert reply.json()["error"] == "invalid_scope"


def test_a_json_body_is_invalid_request(oidc, ada):
    reply = httpx.post(oidc.token_url, json=oidc.password_form("ada@example.org"))
    assert reply.status_code == 400
    assert reply.json()["error"] == "invalid_request"


def test_a_field_given_twice_is_invalid_request(oidc, ada):
    body = "client_id=fuzzball-cli&grant_type=password&grant_type=password"
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    reply = httpx.post(oidc.token_url, content=body, headers=headers)
    assert reply.json() == {
        "error": "invalid_request",
        "error_description": "grant_type: given more than once",
    }


@pytest.mark.parametrize("body", [b"grant_type=%ff%fe", b"grant_type=\xff\xfe", b"\x00=\x00"])
def test_a_form_of_bytes_that_are_not_utf8_is_an_oauth_400(oidc, body):
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    reply = httpx.post(oidc.token_url, content=body, headers=headers)
    assert reply.status_code == 400
    assert reply.json()["error"] in ("invalid_request", "unsupported_grant_type")


def test_an_access_token_calls_the_api_as_the_users_login(oidc, ada):
    access = token_of(oidc)["access_token"]
    who = oidc.service.authenticate(access)
    assert (who.user_id, who.credential) == (ada.id, CredentialKind.LOGIN)
    reply = httpx.get(f"{oidc.url}/v3/workflows", headers={"Authorization": f"Bearer {access}"})
    assert reply.status_code == 200


def test_an_expired_access_token_is_refused_saying_so(oidc, ada):
    access = token_of(oidc)["access_token"]
    oidc.clock.advance(301)
    reply = httpx.get(f"{oidc.url}/v3/workflows", headers={"Authorization": f"Bearer {access}"})
    assert reply.status_code == 401
    assert "access token expired" in reply.json()["message"]


def test_a_token_signed_by_another_key_is_refused(oidc, ada):
    claims = jwt.decode(token_of(oidc)["access_token"], options={"verify_signature": False})
    forged = jwt.encode(claims, SigningKey.generate().private_key, "RS256")
    reply = httpx.get(f"{oidc.url}/v3/workflows", headers={"Authorization": f"Bearer {forged}"})
    assert reply.status_code == 401
    assert "not valid" in reply.json()["message"]


def test_an_unsigned_token_is_refused(oidc, ada):
    claims = jwt.decode(token_of(oidc)["access_token"], options={"verify_signature": False})
    unsigned = jwt.encode(claims, None, "none")
    reply = httpx.get(f"{oidc.url}/v3/workflows", headers={"Authorization": f"Bearer {unsigned}"})
    assert reply.status_code == 401


def test_api_tokens_keep_working_beside_access_tokens(oidc, ada):
    who = oidc.service.identity.login_principal(ada.id)
    token = oidc.service.identity.account_token(who, who.account_id)
    reply = httpx.get(f"{oidc.url}/v3/workflows", headers={"Authorization": f"Bearer {token}"})
    assert reply.status_code == 200
    assert oidc.service.authenticate(token).credential == CredentialKind.API


def test_a_user_whose_password_was_reset_is_told_to_update_it(oidc, ada):
    owner = oidc.service.identity.login_principal(ada.id)
    member, _ = oidc.service.identity.add_member(
        owner, "bob@example.org", password=PASSWORD, require_update=True
    )
    assert token_of(oidc, member.email)["required_actions"] == ["UPDATE_PASSWORD"]


@contextmanager
def grpc_workflows(oidc) -> Iterator[pb_grpc.WorkflowServiceStub]:
    """The gRPC client API over the stack's service, as Orchestrate serves it."""
    servers = oidc.loop.run(start_servers(oidc.service))
    try:
        with grpc.insecure_channel(servers.grpc_target) as channel:
            yield pb_grpc.WorkflowServiceStub(channel)
    finally:
        oidc.loop.run(servers.close())


def test_an_access_token_calls_the_grpc_api_too(oidc, ada):
    bearer = [("authorization", f"Bearer {token_of(oidc)['access_token']}")]
    with grpc_workflows(oidc) as workflows:
        listed = workflows.ListWorkflows(pb.ListWorkflowsRequest(), metadata=bearer)
    assert list(listed.workflows) == []


def test_an_expired_access_token_is_refused_over_grpc(oidc, ada):
    bearer = [("authorization", f"Bearer {token_of(oidc)['access_token']}")]
    oidc.clock.advance(301)
    with grpc_workflows(oidc) as workflows, pytest.raises(grpc.RpcError) as refused:
        workflows.ListWorkflows(pb.ListWorkflowsRequest(), metadata=bearer)
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "access token expired" in refused.value.details()


def test_the_openapi_document_describes_every_oidc_route():
    document, routes = document_adding(oidc_routes(types.SimpleNamespace(oidc=object())))
    assert {route.split(" ", 1)[1] for route in routes} == set(PUBLIC_PATHS)
    assert undescribed(document, routes) == set()
