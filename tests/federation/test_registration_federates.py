"""A Federate joins another as its member (kind FEDERATE), and a member keeps the Federates it
trusts by registration in its store."""

from __future__ import annotations

import time

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import select
from support.federation_harness import start_federation
from support.live_api import HELLO

from fuzzball_core.client import FuzzballClient
from fuzzball_core.config import DEFAULT_TOKEN_LIFETIME
from fuzzball_core.errors import FailedPrecondition, Unauthenticated
from fuzzball_core.orchestrate.cluster_registration_routes import ClusterRegistration
from fuzzball_core.service.accounts import Accounts
from fuzzball_core.service.forwarded_identity import (
    TrustedFederate,
    TrustedFederates,
    public_jwk,
)
from fuzzball_core.service.revocations import Revocation
from fuzzball_core.store.models import Account, TrustedFederateKey
from fuzzball_federation.forwarding import acting_for
from fuzzball_federation.models import FederateTrust

GENERATE = "/admin/cluster/registration/configuration:generate"


@pytest.fixture
def lower(tmp_path, members):
    """Federate ``lower`` over the static ``onprem`` and ``aws``."""
    federation = start_federation(tmp_path / "lower", members, admin=True, name="lower")
    try:
        yield federation
    finally:
        federation.close()


@pytest.fixture
def upper(tmp_path):
    """Federate ``upper`` with no member yet."""
    federation = start_federation(tmp_path / "upper", [], admin=True, name="upper")
    try:
        yield federation
    finally:
        federation.close()


def _join(upper, lower):
    jwk = public_jwk(upper.service.signer.key)
    params = {"federateName": "upper", "federateJwk": jwk}
    config = lower.client().call_json("GET", GENERATE, params=params)["config"]
    upper.client().call_json("POST", "/admin/cluster/registration", body={"config": config})
    return config


def test_a_federate_joins_another_as_a_federate_kind_member(upper, lower):
    config = _join(upper, lower)
    listed = {c["name"]: c for c in upper.client().call_json("GET", "/clusters")["clusters"]}
    assert listed["lower"]["kind"] == "CLUSTER_KIND_FEDERATE"
    assert listed["lower"]["id"] == config["id"]
    assert listed["upper"]["local"] is True


def test_work_sent_to_a_federate_member_runs_on_its_own_member_for_the_caller(upper, lower):
    _join(upper, lower)
    workflow_id = upper.client().start_workflow(HELLO)
    assert upper.service.cluster_of(upper.who, workflow_id) == "lower"
    shown = upper.client().get_workflow(workflow_id)
    assert shown.id == workflow_id


def test_a_federate_refuses_identities_from_a_federate_it_did_not_register_with(upper, lower):
    member = lower.service
    _, token = member.create_account("fed-account", kind="federate")
    who = member.authenticate(token)
    assertion = upper.service.signer.assertion(upper.who, "lower")
    with pytest.raises(Unauthenticated, match="trusts no Federate"):
        member.forwarded_principal(who, assertion)


def test_a_member_trusts_the_federate_it_generated_a_registration_for_after_a_restart(members):
    member = members[0]
    service = member.stack.service
    _, admin = member.stack.create_account("root", kind="admin")
    key_holder = TrustedFederates(())
    key = Ed25519PrivateKey.generate()
    with FuzzballClient(f"{member.rest_url}/v3", admin) as api:
        api.call_json(
            "GET", GENERATE, params={"federateName": "elsewhere", "federateJwk": public_jwk(key)}
        )
    # a restarted Orchestrate reads its trust from the store
    again = ClusterRegistration(service.sessions, service.accounts, lambda: key_holder, name="x")
    again.load()
    trusted = key_holder.trusts("elsewhere")
    assert trusted is not None and public_jwk(trusted.public_key) == public_jwk(key)


def test_a_name_the_configuration_trusts_with_another_key_is_refused(members):
    member = members[0]
    service = member.stack.service
    configured = TrustedFederates(
        [TrustedFederate("pinned", Ed25519PrivateKey.generate().public_key())]
    )
    registration = ClusterRegistration(
        service.sessions, service.accounts, lambda: configured, name="x"
    )
    with pytest.raises(FailedPrecondition, match="trusted-federates"):
        registration.generate(
            "http://127.0.0.1:1",
            federate_name="pinned",
            federate_jwk=public_jwk(Ed25519PrivateKey.generate()),
        )


def test_identities_are_signed_for_the_member_by_its_registered_name(upper, lower):
    _join(upper, lower)
    member = upper.service.members.get("lower")
    with acting_for(lambda audience: upper.service.signer.assertion(upper.who, audience)):
        assert member.client().list_workflows() == []


def test_a_federate_that_leaves_a_federate_member_has_its_token_revoked_there(upper, lower):
    config = _join(upper, lower)
    upper.client().call_json("DELETE", f"/admin/cluster/{config['id']}")
    with pytest.raises(Unauthenticated, match="revoked"):
        lower.service.authenticate(config["apiToken"])


def test_a_federate_member_refuses_identities_from_a_federate_that_left_it(upper, lower):
    config = _join(upper, lower)
    member = lower.service
    who = member.authenticate(config["apiToken"])  # kept: the token is revoked as it leaves
    assertion = upper.service.signer.assertion(upper.who, "lower")
    assert member.forwarded_principal(who, assertion).name.endswith("via upper")
    upper.client().call_json("DELETE", f"/admin/cluster/{config['id']}")
    with pytest.raises(Unauthenticated, match="trusts no Federate"):
        member.forwarded_principal(who, assertion)
    # nor after a restart: the key's row went with it
    restarted = TrustedFederates(())
    member.registrations.trusted = restarted
    member.registrations.load()
    assert restarted.trusts("upper") is None


def test_a_configured_key_is_trusted_again_once_a_registration_for_its_name_ends():
    configured = TrustedFederate("hub", Ed25519PrivateKey.generate().public_key())
    trusted = TrustedFederates([configured])
    trusted.trust(TrustedFederate("hub", Ed25519PrivateKey.generate().public_key(), "a1"))
    trusted.trust(TrustedFederate("other", Ed25519PrivateKey.generate().public_key(), "a2"))
    trusted.distrust("hub")
    trusted.distrust("other")
    assert trusted.trusts("hub") == configured
    assert trusted.trusts("other") is None


def test_revoking_a_registrations_tokens_from_another_process_ends_its_key_s_trust(members):
    member = members[0]
    service = member.stack.service
    _, admin = member.stack.create_account("root", kind="admin")
    with FuzzballClient(f"{member.rest_url}/v3", admin) as api:
        params = {
            "federateName": "elsewhere",
            "federateJwk": public_jwk(Ed25519PrivateKey.generate()),
        }
        api.call_json("GET", GENERATE, params=params)
    with service.sessions() as session:
        account = session.scalars(
            select(Account.name)
            .join(TrustedFederateKey, TrustedFederateKey.account_id == Account.id)
            .where(TrustedFederateKey.name == "elsewhere")
        ).one()
    # the server's `revoke-token --account` command: a process of its own, with its own
    # accounts and registration over the same store
    command_accounts = Accounts(service.sessions)
    ClusterRegistration(service.sessions, command_accounts, lambda: TrustedFederates(()), name="x")
    told: list[Revocation] = []
    command_accounts.revocations.subscribe(told.append)  # what its channel sends the server
    command_accounts.revoke_all(account)
    assert service.trusted_federates.trusts("elsewhere") is not None  # not told yet
    for revocation in told:  # as the server's RevocationReceiver announces it
        service.accounts.revocations.announce(revocation)
    assert service.trusted_federates.trusts("elsewhere") is None
    with service.sessions() as session:
        assert session.get(TrustedFederateKey, "elsewhere") is None


def test_a_federate_member_honours_a_registrations_key_only_with_that_registrations_token(
    upper, lower
):
    config = _join(upper, lower)
    member = lower.service
    _, token = member.create_account("fed-account", kind="federate")  # not the registration's
    assertion = upper.service.signer.assertion(upper.who, "lower")
    registration = member.authenticate(config["apiToken"])
    assert member.forwarded_principal(registration, assertion).name.endswith("via upper")
    with pytest.raises(Unauthenticated, match="only with the token of the registration"):
        member.forwarded_principal(member.authenticate(token), assertion)


def _assert_the_key_is_dropped_at_start(member):
    """``member``, loading its trusted Federates as at a restart, trusts no key of "upper" and
    keeps no row of one."""
    restarted = TrustedFederates(())
    member.registrations.trusted = restarted
    member.registrations.load()
    assert restarted.trusts("upper") is None
    with member.sessions() as session:
        assert session.scalars(select(FederateTrust)).all() == []


def test_a_federate_member_drops_a_key_whose_registration_tokens_expired_at_start(upper, lower):
    _join(upper, lower)
    member = lower.service
    member.accounts.clock = lambda: time.time() + DEFAULT_TOKEN_LIFETIME + 60
    _assert_the_key_is_dropped_at_start(member)


def test_a_key_a_registration_records_must_name_its_account():
    trusted = TrustedFederates(())
    with pytest.raises(ValueError, match="names its account"):
        trusted.trust(TrustedFederate("hub", Ed25519PrivateKey.generate().public_key()))
    assert trusted.trusts("hub") is None


def test_a_federate_member_drops_a_key_recorded_with_no_account_at_start(upper, lower):
    _join(upper, lower)
    member = lower.service
    with member.sessions() as session, session.begin():
        session.get(FederateTrust, "upper").account_id = None
    _assert_the_key_is_dropped_at_start(member)
