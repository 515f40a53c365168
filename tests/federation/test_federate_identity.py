"""Federate checks its callers' permissions itself and tells members who each call is for.

Before, Federate's hold calls went out with the member account's token, so any Federate user
could cordon member nodes. Now Federate refuses a caller without the permission (logging it),
and signs the caller's identity into every member call; a member trusting Federate's key acts
for that caller only with the permissions both hold, and audits under the caller's name.
"""

from __future__ import annotations

import logging
import stat

import grpc
import httpx
import pytest
import yaml
from click.testing import CliRunner
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from support.federated_workflows import GPU
from support.sql_stack import ADMIN

from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.api.v1 import client_pb2_grpc as pb_grpc
from fuzzball_core.config import parse_config
from fuzzball_core.errors import PermissionDenied
from fuzzball_core.service.audit import AuditQuery
from fuzzball_core.service.forwarded_identity import (
    HEADER,
    IdentitySigner,
    TrustedFederates,
    load_or_create_key,
)
from fuzzball_core.service.views import Principal
from fuzzball_core.vocabulary import AuditAction, Permission
from fuzzball_federation.main import IDENTITY_KEY_FILE
from fuzzball_federation.main import cli as federate_cli


def _member_holds(federation, cluster: str = "onprem", node: str = "gpu-1") -> list:
    return federation.members[cluster].stack.list_holds(ADMIN, node)


@pytest.fixture
def admin(federation) -> str:
    return federation.service.create_account("root", admin=True)[1]


def _onprem_call(federation, identity: str | None, method: str, path: str, **kwargs):
    """A call to onprem as Federate's account there, forwarding ``identity``."""
    onprem = federation.members["onprem"]
    headers = {"Authorization": f"Bearer {onprem.token}"}
    if identity is not None:
        headers[HEADER] = identity
    return httpx.request(
        method, f"{onprem.rest_url}/v3{path}", headers=headers, timeout=10, **kwargs
    )


def test_federate_refuses_a_non_admin_hold(federation, caplog):
    caplog.set_level(logging.WARNING, logger="fuzzball.federate")
    with pytest.raises(PermissionDenied, match="hold_nodes"):
        federation.client().add_hold("gpu-1", "cordon", "mine now")
    assert _member_holds(federation) == []
    assert "refused alice" in caplog.text


def test_an_administrators_hold_reaches_the_member_in_their_name(federation, admin):
    hold = federation.client(admin).add_hold("gpu-1", "cordon", "firmware")
    (placed,) = _member_holds(federation)
    assert (placed.id, placed.source, placed.placed_by) == (
        int(hold.id),
        "admin",
        "root via federate",
    )
    member_audit = federation.members["onprem"].stack.service.audit
    (entry,) = member_audit.query(AuditQuery(action=AuditAction.HOLD_ADDED)).entries
    assert entry.actor == "root via federate"


def test_a_member_refuses_a_forwarded_hold_for_a_caller_without_hold_nodes(federation):
    alice = federation.who
    identity = federation.service.signer.assertion(alice, "onprem")
    reply = _onprem_call(
        federation, identity, "POST", "/nodes/gpu-1/holds", json={"effect": "cordon"}
    )
    assert reply.status_code == 403
    assert "hold_nodes" in reply.json()["message"]
    assert _member_holds(federation) == []


def test_a_member_refuses_a_forwarded_hold_over_grpc_too(federation):
    onprem = federation.members["onprem"]
    identity = federation.service.signer.assertion(federation.who, "onprem")
    metadata = (("authorization", f"Bearer {onprem.token}"), (HEADER.lower(), identity))
    request = pb.AddNodeHoldRequest(node_id="gpu-1", effect="cordon")
    with grpc.insecure_channel(onprem.grpc_target) as channel, pytest.raises(grpc.RpcError) as no:
        pb_grpc.NodeServiceStub(channel).AddNodeHold(request, metadata=metadata)
    assert no.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert _member_holds(federation) == []


def test_without_a_forwarded_identity_federates_account_could_hold(federation):
    """What the forwarded identity takes away: the account's own right, used for a user."""
    reply = _onprem_call(federation, None, "POST", "/nodes/gpu-1/holds", json={"effect": "cordon"})
    assert reply.status_code == 200


def test_a_member_refuses_an_identity_signed_with_another_key(federation):
    forger = IdentitySigner(Ed25519PrivateKey.generate(), "federate")
    identity = forger.assertion(federation.who, "onprem")
    reply = _onprem_call(federation, identity, "GET", "/workflows")
    assert reply.status_code == 401
    assert "not valid" in reply.json()["message"]


def test_a_member_refuses_an_identity_from_a_federate_it_does_not_trust(federation):
    stranger = IdentitySigner(federation.service.signer.key, "another-federate")
    reply = _onprem_call(
        federation, stranger.assertion(federation.who, "onprem"), "GET", "/workflows"
    )
    assert reply.status_code == 401
    assert "not trusted here" in reply.json()["message"]


def test_a_member_trusting_no_federate_refuses_a_forwarded_identity(federation):
    federation.members["onprem"].stack.service.trusted_federates = TrustedFederates(())
    identity = federation.service.signer.assertion(federation.who, "onprem")
    reply = _onprem_call(federation, identity, "GET", "/workflows")
    assert reply.status_code == 401
    assert "orchestrate.trusted-federates" in reply.json()["message"]


def test_an_expired_forwarded_identity_is_refused(federation):
    signer = federation.service.signer
    stale = IdentitySigner(signer.key, signer.issuer, clock=lambda: 1_000_000.0)
    reply = _onprem_call(federation, stale.assertion(federation.who, "onprem"), "GET", "/workflows")
    assert reply.status_code == 401
    assert "expired" in reply.json()["message"]


def test_a_users_workflows_run_through_the_federate_with_their_identity(federation):
    workflow_id = federation.client().start_workflow(GPU)
    assert federation.client().get_workflow(workflow_id).id == workflow_id


def test_the_federates_signing_key_is_its_owners_only(federation, tmp_path):
    key_file = tmp_path / "federate" / IDENTITY_KEY_FILE
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600


def test_a_member_trusts_the_key_identity_key_prints_by_its_configuration(tmp_path):
    config = tmp_path / "federate.yaml"
    config.write_text(yaml.safe_dump({"data-dir": str(tmp_path / "fed")}))
    printed = CliRunner().invoke(federate_cli, ["--config", str(config), "identity-key"])
    assert printed.exit_code == 0, printed.output
    (tmp_path / "fed.pub").write_text(printed.output)
    member = parse_config(
        {"orchestrate": {"trusted-federates": {"federate": str(tmp_path / "fed.pub")}}}
    )
    trusted = TrustedFederates.from_files(member.orchestrate.trusted_federates)
    key = load_or_create_key(tmp_path / "fed" / IDENTITY_KEY_FILE)
    signer = IdentitySigner(key, "federate")
    bearer = Principal("acct", "federate", permissions=frozenset({Permission.RUN_WORKFLOWS}))
    caller = Principal("a", "alice", email="alice@example.test")
    forwarded = trusted.principal(bearer, signer.assertion(caller, "member"))
    assert (forwarded.account_id, forwarded.email) == ("acct", "alice@example.test")
    assert forwarded.permissions == frozenset({Permission.RUN_WORKFLOWS})
