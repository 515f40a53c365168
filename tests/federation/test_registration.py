"""Members join a running Federate by registration, are listed, health checked, and leave."""

from __future__ import annotations

import asyncio
import json
import logging
import time

import httpx
import pytest
from sqlalchemy import delete, select
from support.federation_harness import GIB, start_federation, start_member
from support.live_api import HELLO
from support.tcp_relay import TcpRelay

from fuzzball_core.client import FuzzballClient
from fuzzball_core.config import DEFAULT_TOKEN_LIFETIME, parse_config
from fuzzball_core.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Unauthenticated,
)
from fuzzball_core.orchestrate.cluster_registration_routes import ClusterRegistration
from fuzzball_core.service.forwarded_identity import HEADER as FORWARDED_IDENTITY
from fuzzball_core.service.forwarded_identity import TrustedFederates, public_jwk
from fuzzball_core.service.revocations import Revocation
from fuzzball_core.store.models import TrustedFederateKey
from fuzzball_federation.main import ENDS, build, federate_health, poll_members, reach_members
from fuzzball_federation.members import configured_id
from fuzzball_federation.models import RegisteredCluster
from fuzzball_federation.registration import END_RETRY_FIRST, END_RETRY_MAX
from fuzzball_federation.routers.fit import FitRouter

GENERATE = "/admin/cluster/registration/configuration:generate"
CPU = HELLO


@pytest.fixture
def late(tmp_path):
    """An Orchestrate that is no member yet (64 cores: the roomiest), with an admin token."""
    member = start_member(tmp_path, "late", [{"name": "big", "cores": 64, "memory": 256 * GIB}])
    _, member.admin_token = member.stack.create_account("root", kind="admin")
    member.closed = False
    try:
        yield member
    finally:
        if not member.closed:
            member.close()


@pytest.fixture
def fed(tmp_path, members):
    """A Federate over the static ``onprem`` and ``aws``; its user is an administrator."""
    federation = start_federation(tmp_path, members, admin=True)
    try:
        yield federation
    finally:
        federation.close()


def _generate(member, fed, token=None):
    with FuzzballClient(f"{member.rest_url}/v3", token or member.admin_token) as api:
        reply = api.call_json(
            "GET",
            GENERATE,
            params={"federateName": "federate", "federateJwk": public_jwk(fed.service.signer.key)},
        )
    return reply["config"]


def _join(fed, member):
    config = _generate(member, fed)
    fed.client().call_json("POST", "/admin/cluster/registration", body={"config": config})
    return config


def _clusters(fed, token=None):
    listed = fed.client(token).call_json("GET", "/clusters")["clusters"]
    return {c["name"]: c for c in listed}


def test_a_member_registered_while_federate_runs_receives_work_without_a_restart(fed, late):
    before = fed.client().start_workflow(CPU)
    assert fed.service.cluster_of(fed.who, before) == "aws"
    config = _join(fed, late)
    workflow_id = fed.client().start_workflow(CPU)
    assert fed.service.cluster_of(fed.who, workflow_id) == "late"
    shown = _clusters(fed)["late"]
    assert (shown["id"], shown["kind"], shown["status"]) == (
        config["id"],
        "CLUSTER_KIND_ORCHESTRATE",
        "CLUSTER_STATUS_READY",
    )


def test_a_member_joins_with_the_labels_the_router_prices_it_by(fed, late):
    config = _generate(late, fed)
    body = {"config": config, "labels": {"price-per-hour": "50"}}
    fed.client().call_json("POST", "/admin/cluster/registration", body=body)
    (member,) = [m for m in fed.service.members.snapshot() if m.name == "late"]
    # the router reads a member's prices from these (tests/federation/test_fit_router.py)
    assert member.config.labels == {"price-per-hour": "50"}
    with fed.service.sessions() as session:
        (row,) = session.scalars(select(RegisteredCluster).where(RegisteredCluster.name == "late"))
        assert row.labels == {"price-per-hour": "50"}


def test_generate_gives_a_stable_id_a_fresh_federate_token_and_the_clusters_name(fed, late):
    first, second = _generate(late, fed), _generate(late, fed)
    assert first["id"] == second["id"]
    assert first["apiToken"] != second["apiToken"]
    assert first["name"] == "late" and first["kind"] == "CLUSTER_KIND_ORCHESTRATE"
    assert late.stack.service.authenticate(first["apiToken"]).kind == "federate"


def test_generate_on_a_member_is_refused_to_a_non_admin(fed, late):
    with pytest.raises(PermissionDenied):
        _generate(late, fed, token=late.token)


def test_the_federate_lists_itself_as_a_federate_cluster(fed):
    listed = fed.client().call_json("GET", "/clusters")["clusters"]
    local = [c for c in listed if c.get("local")]
    assert [(c["name"], c["kind"]) for c in local] == [("federate", "CLUSTER_KIND_FEDERATE")]
    shown = fed.client().call_json("GET", f"/cluster/{local[0]['id']}")
    assert shown["name"] == "federate"


def test_a_configured_member_has_the_id_derived_from_its_name(fed):
    assert _clusters(fed)["aws"]["id"] == configured_id("aws")
    shown = fed.client().call_json("GET", f"/admin/cluster/{configured_id('aws')}")
    assert shown["name"] == "aws"


def test_a_member_that_leaves_gets_no_more_work(fed, late):
    config = _join(fed, late)
    reply = fed.client().call_json("DELETE", f"/admin/cluster/{config['id']}")
    assert reply == {"id": config["id"]}
    assert "late" not in _clusters(fed)
    workflow_id = fed.client().start_workflow(CPU)
    assert fed.service.cluster_of(fed.who, workflow_id) == "aws"


def test_leaving_with_a_running_federated_workflow_is_refused_and_the_member_drains(fed, late):
    config = _join(fed, late)
    running = fed.client().start_workflow(CPU)
    assert fed.service.cluster_of(fed.who, running) == "late"
    with pytest.raises(FailedPrecondition, match="now draining") as refused:
        fed.client().call_json("DELETE", f"/admin/cluster/{config['id']}")
    assert running in refused.value.message
    shown = _clusters(fed)["late"]
    assert (shown["status"], shown["statusReason"]) == ("CLUSTER_STATUS_DISABLED", "draining")
    again = fed.client().start_workflow(CPU)
    assert fed.service.cluster_of(fed.who, again) == "aws"


def test_a_configured_member_cannot_leave_through_the_api(fed):
    with pytest.raises(FailedPrecondition, match=r"federate\.clusters"):
        fed.client().call_json("DELETE", f"/admin/cluster/{configured_id('aws')}")


def test_an_unreachable_member_is_listed_with_the_reason(fed, late):
    _join(fed, late)
    late.close()
    late.closed = True
    reach_members(fed.service.members)
    shown = _clusters(fed)["late"]
    assert shown["status"] == "CLUSTER_STATUS_UNREACHABLE"
    assert shown["statusReason"]


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/admin/clusters", None),
        ("GET", f"/admin/cluster/{configured_id('aws')}", None),
        ("DELETE", f"/admin/cluster/{configured_id('aws')}", None),
        ("POST", "/admin/cluster/registration", {"config": {}}),
        ("GET", GENERATE, None),
    ],
)
def test_admin_routes_are_refused_to_a_non_admin(fed, method, path, body):
    _, token = fed.service.create_account("bob")
    with pytest.raises(PermissionDenied):
        fed.client(token).call_json(method, path, body=body)


@pytest.mark.parametrize(
    "path", ["/cluster/no-such-id", "/admin/cluster/no-such-id"], ids=["show", "admin-show"]
)
def test_an_unknown_cluster_id_is_not_found(fed, path):
    with pytest.raises(NotFound, match="no-such-id"):
        fed.client().call_json("GET", path)


def test_leaving_an_unknown_cluster_id_is_not_found(fed):
    with pytest.raises(NotFound, match="no-such-id"):
        fed.client().call_json("DELETE", "/admin/cluster/no-such-id")


GOOD = {
    "id": "c-1",
    "name": "x",
    "kind": "CLUSTER_KIND_ORCHESTRATE",
    "apiEndpoint": "http://127.0.0.1:9",
    "apiToken": "t",
}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "config"),
        ({"config": "x"}, "config"),
        ({"config": GOOD, "extra": 1}, "extra"),
        ({"config": {**GOOD, "name": ""}}, "config.name"),
        ({"config": {**GOOD, "id": "a b"}}, "config.id"),
        ({"config": {**GOOD, "kind": "CLUSTER_KIND_X"}}, "config.kind"),
        ({"config": {**GOOD, "apiEndpoint": "ftp://x"}}, "config.apiEndpoint"),
        ({"config": {**GOOD, "apiToken": ""}}, "config.apiToken"),
        ({"config": {**GOOD, "jwkPublicKey": "nope"}}, "config.jwkPublicKey"),
        ({"config": {**GOOD, "colour": "red"}}, "config.colour"),
        ({"config": {**GOOD, "name": 3}}, "config.name"),
        ({"config": GOOD, "labels": ["price-per-hour"]}, "labels"),
        ({"config": GOOD, "labels": {"Price Per Hour": "1"}}, "labels"),
        ({"config": GOOD, "labels": {"price-per-hour": "cheap"}}, "labels.price-per-hour"),
        ({"config": GOOD, "labels": {"egress-price-per-gib": "-1"}}, "labels.egress-price-per-gib"),
        ({"config": GOOD, "labels": {"zone": 3}}, "labels.zone"),
    ],
)
def test_a_bad_registration_is_refused_naming_the_field(fed, body, field):
    with pytest.raises(InvalidArgument) as refused:
        fed.client().call_json("POST", "/admin/cluster/registration", body=body)
    assert refused.value.message.startswith(f"{field}:")


def test_a_registration_whose_token_the_member_refuses_is_not_stored(fed, late):
    config = {**_generate(late, fed), "apiToken": "not-a-token"}
    with pytest.raises(InvalidArgument, match=r"config\.apiToken"):
        fed.client().call_json("POST", "/admin/cluster/registration", body={"config": config})
    assert "late" not in _clusters(fed)


def test_registering_a_taken_name_is_refused(fed, late):
    config = {**_generate(late, fed), "name": "aws"}
    with pytest.raises(AlreadyExists, match=r"config\.name"):
        fed.client().call_json("POST", "/admin/cluster/registration", body={"config": config})


def test_the_registration_token_is_in_no_log_read_or_store_row(fed, late, caplog):
    caplog.set_level(logging.DEBUG)
    config = _join(fed, late)
    token = config["apiToken"]
    reads = [
        fed.client().call_json("GET", "/clusters"),
        fed.client().call_json("GET", "/admin/clusters"),
        fed.client().call_json("GET", f"/admin/cluster/{config['id']}"),
    ]
    assert token not in json.dumps(reads)
    assert token not in caplog.text
    with fed.service.sessions() as session:
        rows = session.connection().exec_driver_sql("SELECT * FROM federate_clusters").all()
    assert token not in repr(rows)


def test_a_registered_member_is_a_member_again_after_a_restart(tmp_path, fed, late):
    config = _join(fed, late)
    again = build(
        parse_config({"data-dir": str(tmp_path / "federate"), "federate": {"member-timeout": 5}}),
        FitRouter({}),
    )
    try:
        assert again.members.by_id(config["id"]).name == "late"
    finally:
        again.members.close()


def test_the_cluster_routes_are_described_in_federates_openapi_document(fed):
    paths = fed.client().call_json("GET", "/openapi.json")["paths"]
    assert paths["/v3/admin/cluster/registration"]["post"]["summary"] == (
        "A member joins the federation"
    )
    assert "summary" in paths["/v3/cluster/{id}"]["get"]


def test_a_draining_member_leaves_by_itself_once_its_federated_workflows_ended(fed, late):
    config = _join(fed, late)
    running = fed.client().start_workflow(CPU)
    with pytest.raises(FailedPrecondition):
        fed.client().call_json("DELETE", f"/admin/cluster/{config['id']}")
    fed.client().stop_workflow(running)
    assert fed.service.registrations.finish_draining() == ["late"]
    assert "late" not in _clusters(fed)


def test_a_joining_member_gets_a_health_condition_and_loses_it_when_it_leaves(fed, late):
    health = federate_health(fed.service)
    config = _join(fed, late)
    assert "cluster late" in [c.name for c in health.conditions()]
    fed.client().call_json("DELETE", f"/admin/cluster/{config['id']}")
    assert "cluster late" not in [c.name for c in health.conditions()]


# -- leaving revokes the token the member gave --------------------------------------------------


def _revoked_on(member, token):
    """Whether ``member`` refuses ``token`` as revoked (False: it takes it)."""
    try:
        member.stack.service.authenticate(token)
    except Unauthenticated as refused:
        return "revoked" in refused.message
    return False


def test_a_member_that_leaves_has_the_token_it_gave_revoked_there(fed, late):
    config = _join(fed, late)
    fed.client().call_json("DELETE", f"/admin/cluster/{config['id']}")
    assert _revoked_on(late, config["apiToken"])


def test_a_draining_member_that_leaves_by_itself_has_the_token_it_gave_revoked_there(fed, late):
    config = _join(fed, late)
    running = fed.client().start_workflow(CPU)
    with pytest.raises(FailedPrecondition):
        fed.client().call_json("DELETE", f"/admin/cluster/{config['id']}")
    assert not _revoked_on(late, config["apiToken"])  # still good while it drains
    fed.client().stop_workflow(running)
    fed.service.registrations.finish_draining()
    assert _revoked_on(late, config["apiToken"])


def test_a_member_that_cannot_be_reached_leaves_and_the_log_says_how_to_revoke_its_token(
    fed, late, caplog
):
    config = _join(fed, late)
    late.close()
    late.closed = True
    reply = fed.client().call_json("DELETE", f"/admin/cluster/{config['id']}")
    assert reply == {"id": config["id"]}
    assert "late" not in _clusters(fed)
    assert "fuzzball-orchestrate revoke-token --account" in caplog.text
    assert config["apiToken"] not in caplog.text


def test_a_member_ends_a_registration_only_for_its_own_id(fed, late):
    config = _generate(late, fed)
    with (
        FuzzballClient(f"{late.rest_url}/v3", config["apiToken"]) as member,
        pytest.raises(NotFound, match="other-cluster"),
    ):
        member.call_json("DELETE", "/admin/cluster/other-cluster")
    assert not _revoked_on(late, config["apiToken"])


def test_a_member_ends_a_registration_only_for_a_federate_account(fed, late):
    config = _generate(late, fed)
    with (
        FuzzballClient(f"{late.rest_url}/v3", late.admin_token) as member,
        pytest.raises(PermissionDenied, match="revoke-token"),
    ):
        member.call_json("DELETE", f"/admin/cluster/{config['id']}")
    assert not _revoked_on(late, late.admin_token)


# -- a draining member registered again ---------------------------------------------------------


def _drain(fed, late):
    """``late`` joined and draining, with a federated workflow running there; that workflow."""
    config = _join(fed, late)
    running = fed.client().start_workflow(CPU)
    with pytest.raises(FailedPrecondition, match="registering it again takes it back"):
        fed.client().call_json("DELETE", f"/admin/cluster/{config['id']}")
    return config, running


def test_a_draining_member_registered_again_takes_work_again(fed, late):
    config, _ = _drain(fed, late)
    again = _generate(late, fed)
    reply = fed.client().call_json("POST", "/admin/cluster/registration", body={"config": again})
    assert reply == {"id": config["id"]}
    assert _clusters(fed)["late"]["status"] == "CLUSTER_STATUS_READY"
    workflow_id = fed.client().start_workflow(CPU)
    assert fed.service.cluster_of(fed.who, workflow_id) == "late"


def test_a_draining_member_registered_again_has_the_token_it_replaced_revoked(fed, late):
    config, _ = _drain(fed, late)
    again = _generate(late, fed)
    fed.client().call_json("POST", "/admin/cluster/registration", body={"config": again})
    assert _revoked_on(late, config["apiToken"])
    assert not _revoked_on(late, again["apiToken"])


def test_a_draining_member_registered_again_stays_once_its_workflows_end(fed, late):
    config, running = _drain(fed, late)
    fed.client().call_json("POST", "/admin/cluster/registration", body={"config": config})
    fed.client().stop_workflow(running)
    assert fed.service.registrations.finish_draining() == []
    assert "late" in _clusters(fed)
    assert not _revoked_on(late, config["apiToken"])  # the same token: kept


def test_registering_a_member_that_takes_work_is_still_refused(fed, late):
    config = _join(fed, late)
    with pytest.raises(AlreadyExists, match=r"config\.name"):
        fed.client().call_json("POST", "/admin/cluster/registration", body={"config": config})


# -- the Federate's key, trusted by registration --------------------------------------------------


def _as_the_federates_user(fed, late, token) -> int:
    """The status ``late`` answers a request made with ``token`` (None: no Authorization)
    and an identity the Federate signed with its forwarding key."""
    headers = {FORWARDED_IDENTITY: fed.service.signer.assertion(fed.who, late.name)}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.get(f"{late.rest_url}/v3/workflows", headers=headers, timeout=30).status_code


def _trusts_the_federate(late) -> bool:
    """Whether ``late`` still trusts the Federate's key (in memory; its row aside)."""
    return late.stack.service.trusted_federates.trusts("federate") is not None


def test_a_member_that_leaves_refuses_requests_signed_with_the_federates_key(fed, late):
    config = _join(fed, late)
    assert _as_the_federates_user(fed, late, config["apiToken"]) == 200
    fed.client().call_json("DELETE", f"/admin/cluster/{config['id']}")
    assert _as_the_federates_user(fed, late, config["apiToken"]) == 401
    assert not _trusts_the_federate(late)
    with late.stack.service.sessions() as session:
        assert session.scalars(select(TrustedFederateKey)).all() == []


def test_a_drained_member_that_left_refuses_requests_signed_with_the_federates_key(fed, late):
    config = _join(fed, late)
    running = fed.client().start_workflow(CPU)
    with pytest.raises(FailedPrecondition):
        fed.client().call_json("DELETE", f"/admin/cluster/{config['id']}")
    assert _as_the_federates_user(fed, late, config["apiToken"]) == 200  # trusted, draining
    fed.client().stop_workflow(running)
    fed.service.registrations.finish_draining()
    assert _as_the_federates_user(fed, late, config["apiToken"]) == 401
    assert not _trusts_the_federate(late)


def test_a_draining_member_registered_again_still_trusts_the_federates_key(fed, late):
    _drain(fed, late)
    again = _generate(late, fed)
    # the Federate revokes the registration it replaced: the key is the new one's
    fed.client().call_json("POST", "/admin/cluster/registration", body={"config": again})
    assert _as_the_federates_user(fed, late, again["apiToken"]) == 200


def test_a_key_another_process_dropped_is_refused_once_revocations_are_caught_up(fed, late):
    # the `revoke-token --account` command deleted the row and its notification was lost;
    # the revocation listener, listening again, announces that anything may have been revoked
    config = _join(fed, late)
    with late.stack.service.sessions() as session, session.begin():
        session.execute(delete(TrustedFederateKey))
    assert _as_the_federates_user(fed, late, config["apiToken"]) == 200  # trusted in memory
    late.stack.service.accounts.revocations.announce(Revocation(everything=True))
    assert _as_the_federates_user(fed, late, config["apiToken"]) == 401


# -- a member unreachable as it leaves: its registration ended once it answers ----------------


@pytest.fixture
def relayed(late):
    """A relay to ``late`` that the test cuts off and brings back (the same address)."""
    relay = TcpRelay(("127.0.0.1", int(late.rest_url.rpartition(":")[2])))
    try:
        yield relay
    finally:
        relay.close()


def _join_through(fed, member, relay):
    config = {**_generate(member, fed), "apiEndpoint": relay.url}
    fed.client().call_json("POST", "/admin/cluster/registration", body={"config": config})
    return config


def _leave_unreachable(fed, late, relay):
    """``late`` joined through ``relay`` and left while cut off; its registration's config."""
    config = _join_through(fed, late, relay)
    relay.up = False
    fed.client().call_json("DELETE", f"/admin/cluster/{config['id']}")
    return config


def _later(fed, seconds):
    """The Federate's clock, ``seconds`` on: a pending end is due again."""
    fed.service.registrations.clock = lambda: time.time() + seconds


def test_a_member_unreachable_as_it_left_has_its_registration_ended_once_reachable(
    fed, late, relayed, caplog
):
    caplog.set_level(logging.INFO)
    config = _leave_unreachable(fed, late, relayed)
    assert _as_the_federates_user(fed, late, config["apiToken"]) == 200  # still trusted there
    relayed.up = True
    _later(fed, END_RETRY_FIRST)
    assert fed.service.registrations.retry_ends() == ["late"]
    assert _revoked_on(late, config["apiToken"])
    assert not _trusts_the_federate(late)
    assert fed.service.registrations.pending_ends() == []
    assert "ended its registration now" in caplog.text


def test_a_member_still_unreachable_is_asked_again_later_and_later(fed, late, relayed):
    _leave_unreachable(fed, late, relayed)
    registrations = fed.service.registrations
    assert registrations.retry_ends() == []  # not due yet
    now = time.time()
    registrations.clock = lambda: now
    waits = []
    for _ in range(6):
        now = registrations.pending_ends()[0].next_attempt_at
        assert registrations.retry_ends() == []
        (pending,) = registrations.pending_ends()
        waits.append(pending.next_attempt_at - now)
    assert waits == pytest.approx([20.0, 40.0, 80.0, 160.0, END_RETRY_MAX, END_RETRY_MAX])
    assert pending.attempts == 7 and "cluster late: unreachable" in pending.last_error


def test_a_pending_end_is_asked_again_after_a_restart(tmp_path, fed, late, relayed):
    config = _leave_unreachable(fed, late, relayed)
    relayed.up = True
    again = build(
        parse_config({"data-dir": str(tmp_path / "federate"), "federate": {"member-timeout": 5}}),
        FitRouter({}),
    )
    try:
        registrations = again.registrations
        registrations.clock = lambda: time.time() + END_RETRY_FIRST
        assert registrations.retry_ends() == ["late"]
    finally:
        again.members.close()
        again.sessions.kw["bind"].dispose()
    assert _revoked_on(late, config["apiToken"])


def test_a_member_registered_again_with_the_registration_it_left_is_not_ended(fed, late, relayed):
    config = _leave_unreachable(fed, late, relayed)
    relayed.up = True
    fed.client().call_json("POST", "/admin/cluster/registration", body={"config": config})
    assert fed.service.registrations.pending_ends() == []
    assert not _revoked_on(late, config["apiToken"])
    assert _as_the_federates_user(fed, late, config["apiToken"]) == 200


def test_a_pending_end_shows_in_federates_health_until_it_is_done(fed, late, relayed):
    health = federate_health(fed.service)
    _leave_unreachable(fed, late, relayed)
    asyncio.run(poll_members(fed.service, health, 0))
    pending = health.get(ENDS)
    assert not pending.ok and not pending.required
    assert "late: " in pending.message and "unreachable" in pending.message
    relayed.up = True
    _later(fed, END_RETRY_FIRST)
    asyncio.run(poll_members(fed.service, health, 0))
    assert health.get(ENDS).ok


def test_a_pending_ends_token_is_in_no_log_or_store_row(fed, late, relayed, caplog):
    caplog.set_level(logging.DEBUG)
    config = _leave_unreachable(fed, late, relayed)
    _later(fed, END_RETRY_FIRST)
    fed.service.registrations.retry_ends()
    assert config["apiToken"] not in caplog.text
    with fed.service.sessions() as session:
        rows = (
            session.connection()
            .exec_driver_sql("SELECT * FROM federate_pending_registration_ends")
            .all()
        )
    assert len(rows) == 1 and config["apiToken"] not in repr(rows)


# -- a registration whose token expired before the Federate's end reached the member -----------


def _leave_until_the_token_expired(fed, late, relay):
    """``late`` joined through ``relay`` with a registration token good for a minute, left
    while cut off, and is reached again once that token expired (its clock two minutes on):
    the Federate's retry is answered Unauthenticated, taken as done."""
    accounts = late.stack.service.accounts
    accounts.token_lifetime = 60.0  # what accounts.token-lifetime sets
    config = _leave_unreachable(fed, late, relay)
    accounts.token_lifetime = DEFAULT_TOKEN_LIFETIME
    accounts.clock = lambda: time.time() + 120
    relay.up = True
    _later(fed, END_RETRY_FIRST)
    assert fed.service.registrations.retry_ends() == ["late"]
    assert fed.service.registrations.pending_ends() == []
    return config


def test_a_key_whose_registration_token_expired_is_refused_with_another_federate_accounts_token(
    fed, late, relayed
):
    # late.token: the static members' federate account, live
    _leave_until_the_token_expired(fed, late, relayed)
    assert _as_the_federates_user(fed, late, late.token) == 401


def test_a_registrations_key_is_refused_with_another_federate_accounts_token(fed, late):
    config = _join(fed, late)
    assert _as_the_federates_user(fed, late, config["apiToken"]) == 200
    assert _as_the_federates_user(fed, late, late.token) == 401


def test_a_key_whose_registration_token_expired_is_dropped_once_revocations_are_caught_up(
    fed, late, relayed
):
    _leave_until_the_token_expired(fed, late, relayed)
    late.stack.service.accounts.revocations.announce(Revocation(everything=True))
    assert not _trusts_the_federate(late)
    with late.stack.service.sessions() as session:
        assert session.scalars(select(TrustedFederateKey)).all() == []


def test_a_key_whose_registration_token_expired_is_dropped_at_start(fed, late, relayed):
    _leave_until_the_token_expired(fed, late, relayed)
    service = late.stack.service
    restarted = TrustedFederates(())
    ClusterRegistration(service.sessions, service.accounts, lambda: restarted, name="x").load()
    assert restarted.trusts("federate") is None
    with service.sessions() as session:
        assert session.scalars(select(TrustedFederateKey)).all() == []


def test_a_key_recorded_with_no_account_is_dropped_at_start_and_the_log_says_to_register_again(
    fed, late, caplog
):
    # a key recorded before revision 0019 that the migration matched to no account
    _join(fed, late)
    service = late.stack.service
    with service.sessions() as session, session.begin():
        session.get(TrustedFederateKey, "federate").account_id = None
    restarted = TrustedFederates(())
    with caplog.at_level(logging.WARNING, logger="fuzzball.accounts"):
        ClusterRegistration(service.sessions, service.accounts, lambda: restarted, name="x").load()
    assert restarted.trusts("federate") is None
    with service.sessions() as session:
        assert session.scalars(select(TrustedFederateKey)).all() == []
    assert "Federate federate's key" in caplog.text
    assert "must register again" in caplog.text


def test_a_key_recorded_with_no_account_is_not_honoured_with_another_accounts_token(fed, late):
    _join(fed, late)
    service = late.stack.service
    with service.sessions() as session, session.begin():
        session.get(TrustedFederateKey, "federate").account_id = None
    service.trusted_federates = TrustedFederates(())  # as after a restart
    trusted = lambda: service.trusted_federates  # noqa: E731
    ClusterRegistration(service.sessions, service.accounts, trusted, name="x").load()
    assert _as_the_federates_user(fed, late, late.token) == 401
