"""Revocations are told, once committed, to whoever keeps callers (the endpoint proxy): a
token revoked, an account's tokens revoked, a group deleted, a user removed, a member leaving
a group; and a revocation covers exactly the callers and memberships it names.

Before, nothing was told: the endpoint proxy let a revoked token in until its kept caller
expired (up to 2 s)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fuzzball_core.errors import Unauthenticated
from fuzzball_core.service.accounts import Accounts, token_digest
from fuzzball_core.service.audit import AuditLog
from fuzzball_core.service.identity import Identity
from fuzzball_core.service.revocations import Revocation
from fuzzball_core.service.views import Principal
from fuzzball_core.store.database import connect, migrate, session_factory


@pytest.fixture
def identity(tmp_path) -> Iterator[Identity]:
    """Identity over a migrated SQLite store."""
    engine = connect(f"sqlite:///{tmp_path / 'store.db'}")
    migrate(engine)
    sessions = session_factory(engine)
    yield Identity(sessions, Accounts(sessions), AuditLog(sessions))
    engine.dispose()


@pytest.fixture
def told(identity) -> list[Revocation]:
    """The revocations told to a listener of the identity's accounts."""
    heard: list[Revocation] = []
    identity.accounts.revocations.subscribe(heard.append)
    return heard


def _owner_and_member(identity: Identity) -> tuple[Principal, Principal]:
    """An organization's owner and a member of it, each signed in."""
    _, owner, _ = identity.create_organization("acme", owner_email="owner@acme.test")
    login = identity.login_principal(owner.id)
    member, _ = identity.add_member(login, "dev@acme.test")
    return login, identity.login_principal(member.id)


def test_a_revoked_token_is_told_once_the_revocation_is_committed(identity):
    accounts = identity.accounts
    _, token = accounts.create("alice")
    seen_then: list[Exception] = []

    def listener(revocation: Revocation) -> None:
        try:
            accounts.authenticate(token)
        except Unauthenticated as refused:  # what a keeper asking again finds
            seen_then.append(refused)

    accounts.revocations.subscribe(listener)
    accounts.revoke(token)
    assert len(seen_then) == 1


def test_revoking_a_token_tells_its_digest(identity, told):
    _, token = identity.accounts.create("alice")
    identity.accounts.revoke(token)
    assert told == [Revocation(token_digests=frozenset({token_digest(token)}))]


def test_revoking_an_accounts_tokens_tells_the_account(identity, told):
    alice, _ = identity.accounts.create("alice")
    identity.accounts.revoke_all("alice")
    assert told == [Revocation(account_ids=frozenset({alice.account_id}))]


def test_deleting_a_group_tells_the_group(identity, told):
    owner, _ = _owner_and_member(identity)
    lab = identity.create_account(owner, "lab")
    identity.delete_account(owner, lab.id)
    assert told == [Revocation(account_ids=frozenset({lab.id}))]


def test_removing_a_user_tells_the_user(identity, told):
    owner, member = _owner_and_member(identity)
    identity.remove_member(owner, str(member.user_id))
    assert told == [Revocation(user_ids=frozenset({member.user_id}))]


def test_removing_a_group_member_tells_the_membership(identity, told):
    owner, member = _owner_and_member(identity)
    lab = identity.create_account(owner, "lab")
    identity.add_account_member(owner, lab.id, str(member.user_id))
    identity.remove_account_member(owner, lab.id, str(member.user_id))
    assert told == [Revocation(memberships=frozenset({(member.user_id, lab.id)}))]


def test_a_listener_that_fails_does_not_undo_the_revocation(identity):
    accounts = identity.accounts
    _, token = accounts.create("alice")

    def broken(revocation: Revocation) -> None:
        raise RuntimeError("a keeper's bug")

    accounts.revocations.subscribe(broken)
    accounts.revoke(token)
    with pytest.raises(Unauthenticated, match="revoked"):
        accounts.authenticate(token)


# -- what a revocation covers ---------------------------------------------------------------

ALICE = Principal("acct-alice", "alice", user_id="user-alice")
SERVICE = Principal("acct-service", "service")


def _digest_of(token: str):
    return lambda: token_digest(token)


@pytest.mark.parametrize(
    "revocation",
    [
        Revocation(token_digests=frozenset({token_digest("alice-token")})),
        Revocation(account_ids=frozenset({"acct-alice"})),
        Revocation(user_ids=frozenset({"user-alice"})),
        Revocation(memberships=frozenset({("user-alice", "acct-lab")})),
    ],
    ids=["token", "account", "user", "membership"],
)
def test_a_revocation_covers_the_caller_it_names(revocation):
    assert revocation.covers(_digest_of("alice-token"), ALICE)


@pytest.mark.parametrize(
    "revocation",
    [
        Revocation(token_digests=frozenset({token_digest("another-token")})),
        Revocation(account_ids=frozenset({"acct-alice"})),
        Revocation(user_ids=frozenset({"user-alice"})),
        Revocation(memberships=frozenset({("user-alice", "acct-service")})),
    ],
    ids=["token", "account", "user", "membership"],
)
def test_a_revocation_covers_no_other_caller(revocation):
    assert not revocation.covers(_digest_of("service-token"), SERVICE)


def test_a_revocation_ends_the_memberships_of_its_user_account_or_membership():
    revocation = Revocation(
        user_ids=frozenset({"user-gone"}),
        account_ids=frozenset({"acct-gone"}),
        memberships=frozenset({("user-left", "acct-lab")}),
    )
    ended = [
        revocation.ends_membership(user, account)
        for user, account in [
            ("user-gone", "acct-lab"),
            ("user-stays", "acct-gone"),
            ("user-left", "acct-lab"),
            ("user-left", "acct-other"),
            ("user-stays", "acct-lab"),
        ]
    ]
    assert ended == [True, True, True, False, False]


def test_a_workflows_revocation_covers_its_tokens_callers_only():
    revocation = Revocation(workflow_ids=frozenset({"wf-ended"}))
    ended = Principal("acct-alice", "alice", user_id="user-alice", workflow_id="wf-ended")
    running = Principal("acct-alice", "alice", user_id="user-alice", workflow_id="wf-running")
    assert revocation.covers(_digest_of("ended-token"), ended)
    assert not revocation.covers(_digest_of("running-token"), running)
    assert not revocation.covers(_digest_of("alice-token"), ALICE)


def test_a_revocation_of_everything_covers_every_caller_and_membership():
    # told as the revocation channel listens again after a loss: anything may have been
    # revoked unheard meanwhile
    revocation = Revocation(everything=True)
    assert revocation.covers(_digest_of("alice-token"), ALICE)
    assert revocation.covers(_digest_of("service-token"), SERVICE)
    assert revocation.ends_membership("user-alice", "acct-lab")
