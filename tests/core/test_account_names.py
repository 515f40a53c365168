"""Names are each organization's own: a group's name, and a personal account's (its user's
email), are unique within the organization, so another organization may use them and learns
nothing of them by trying; an email another organization's user signs in with is refused
without saying so. The cluster's own accounts are named apart, and the server's command line
finds them first. A name written by a concurrent request between a check and its insert is
answered as any taken name (ALREADY_EXISTS), never as an internal error.

Before, ``accounts.name`` was unique over the cluster: organization B creating a group named
like organization A's, or like A's user's email, was told "an account named ... already
exists"; adding A's user's email to B said "user ... already exists"; and the race between
two creations of one group escaped as ``sqlite3.IntegrityError`` (500)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from fuzzball_core.errors import AlreadyExists, FailedPrecondition, NotFound
from fuzzball_core.service import identity as identity_module
from fuzzball_core.service.accounts import Accounts
from fuzzball_core.service.audit import AuditLog
from fuzzball_core.service.identity import EMAIL_UNAVAILABLE, Identity
from fuzzball_core.store.database import connect, migrate, session_factory
from fuzzball_core.vocabulary import AccountKind


class Organizations:
    """Organizations ``acme`` (owner and member) and ``globex`` (owner), each signed in."""

    def __init__(self, identity: Identity) -> None:
        _, acme_owner, _ = identity.create_organization("acme", owner_email="owner@acme.test")
        self.globex, globex_owner, _ = identity.create_organization(
            "globex", owner_email="owner@globex.test"
        )
        self.acme_owner = identity.login_principal(acme_owner.id)
        member, _ = identity.add_member(self.acme_owner, "dev@acme.test")
        self.acme_member = identity.login_principal(member.id)
        self.globex_owner = identity.login_principal(globex_owner.id)
        self.admin, _ = identity.create_service_account("cluster-admin", AccountKind.ADMIN)


@pytest.fixture
def identity(database_url) -> Iterator[Identity]:
    """Identity over a migrated store (SQLite, then PostgreSQL)."""
    engine = connect(database_url)
    migrate(engine)
    sessions = session_factory(engine)
    yield Identity(sessions, Accounts(sessions), AuditLog(sessions))
    engine.dispose()


@pytest.fixture
def orgs(identity) -> Organizations:
    return Organizations(identity)


def between_check_and_insert(
    monkeypatch: pytest.MonkeyPatch, check: str, meanwhile: Callable[[], Any]
) -> None:
    """Have ``meanwhile`` (another request, in its own transaction) run once, right after
    the first call of identity's ``check`` found the name free: the race of two requests,
    made deterministic."""
    original = getattr(identity_module, check)
    raced: list[bool] = []

    def checked_then_raced(*args: Any, **kwargs: Any) -> None:
        original(*args, **kwargs)
        if not raced:
            raced.append(True)
            meanwhile()

    monkeypatch.setattr(identity_module, check, checked_then_raced)


# -- groups -------------------------------------------------------------------------------------


def test_another_organization_may_name_a_group_as_one_of_this_organizations(identity, orgs):
    identity.create_account(orgs.acme_owner, "groupA")
    created = identity.create_account(orgs.globex_owner, "groupA")
    assert created.organization_id == orgs.globex.id


def test_a_group_may_be_named_as_another_organizations_users_email(identity, orgs):
    created = identity.create_account(orgs.globex_owner, "dev@acme.test")
    assert created.name == "dev@acme.test"


def test_a_group_may_be_renamed_as_another_organizations_group(identity, orgs):
    identity.create_account(orgs.acme_owner, "groupA")
    group = identity.create_account(orgs.globex_owner, "lab")
    assert identity.update_account(orgs.globex_owner, group.id, name="groupA").name == "groupA"


def test_a_group_name_is_unique_within_its_organization(identity, orgs):
    identity.create_account(orgs.acme_owner, "lab")
    with pytest.raises(AlreadyExists, match="'lab' already exists in this organization"):
        identity.create_account(orgs.acme_member, "lab")


def test_a_group_may_not_take_a_members_personal_account_name(identity, orgs):
    with pytest.raises(AlreadyExists, match="in this organization"):
        identity.create_account(orgs.acme_owner, "dev@acme.test")


def test_a_group_created_meanwhile_by_another_request_is_already_exists(
    identity, orgs, monkeypatch
):
    between_check_and_insert(
        monkeypatch,
        "_account_name_free",
        lambda: identity.create_account(orgs.acme_member, "rg5"),
    )
    with pytest.raises(AlreadyExists, match="'rg5' already exists"):
        identity.create_account(orgs.acme_owner, "rg5")
    names = [a.name for a in identity.list_accounts(orgs.acme_owner)]
    assert names.count("rg5") == 1


def test_a_group_renamed_meanwhile_to_the_same_name_is_already_exists(identity, orgs, monkeypatch):
    first = identity.create_account(orgs.acme_owner, "one")
    second = identity.create_account(orgs.acme_owner, "two")
    between_check_and_insert(
        monkeypatch,
        "_account_name_free",
        lambda: identity.update_account(orgs.acme_owner, first.id, name="three"),
    )
    with pytest.raises(AlreadyExists, match="'three' already exists"):
        identity.update_account(orgs.acme_owner, second.id, name="three")


def test_a_member_added_meanwhile_to_a_group_is_already_exists(identity, orgs, monkeypatch):
    group = identity.create_account(orgs.acme_owner, "lab")
    member_id = orgs.acme_member.user_id
    # adding a member checks its membership with session.get: the race is hooked at the
    # clock, read between that check and the insert
    ticks: list[None] = []
    clock = identity.clock

    def racing_clock() -> float:
        if not ticks:
            ticks.append(None)
            other = Identity(identity.sessions, identity.accounts, identity.audit)
            other.add_account_member(orgs.acme_owner, group.id, member_id)
        return clock()

    identity.clock = racing_clock
    with pytest.raises(AlreadyExists, match="already a member of lab"):
        identity.add_account_member(orgs.acme_owner, group.id, member_id)


# -- members and their personal accounts --------------------------------------------------------


def test_an_email_of_another_organizations_user_is_refused_saying_nothing_of_them(identity, orgs):
    with pytest.raises(FailedPrecondition) as refused:
        identity.add_member(orgs.globex_owner, "dev@acme.test")
    message = str(refused.value)
    assert message == EMAIL_UNAVAILABLE.format(email="dev@acme.test")
    assert "exist" not in message and "acme" not in message.replace("dev@acme.test", "")


def test_an_email_unknown_anywhere_and_one_of_another_organization_differ_only_in_success(
    identity, orgs
):
    # what globex learns: the unknown email is added; the other is refused without a word
    # naming a user, an organization or an account
    added, _ = identity.add_member(orgs.globex_owner, "new@elsewhere.test")
    assert added.email == "new@elsewhere.test"
    with pytest.raises(FailedPrecondition, match="cannot be used in this organization"):
        identity.add_member(orgs.globex_owner, "owner@acme.test")


def test_renaming_a_member_to_another_organizations_email_is_refused_alike(identity, orgs):
    with pytest.raises(FailedPrecondition) as refused:
        identity.update_member(
            orgs.globex_owner, str(orgs.globex_owner.user_id), email="dev@acme.test"
        )
    assert str(refused.value) == EMAIL_UNAVAILABLE.format(email="dev@acme.test")


def test_an_email_of_this_organizations_member_is_already_exists(identity, orgs):
    with pytest.raises(AlreadyExists, match="already a member of this organization"):
        identity.add_member(orgs.acme_owner, "DEV@acme.test")


def test_a_cluster_administrator_is_told_which_organization_has_the_email(identity, orgs):
    with pytest.raises(
        AlreadyExists, match=re.escape("'dev@acme.test' already exists in organization 'acme'")
    ):
        identity.add_member(orgs.admin, "dev@acme.test", organization_id=orgs.globex.id)


def test_a_members_personal_account_may_share_its_name_with_another_organizations_group(
    identity, orgs
):
    identity.create_account(orgs.globex_owner, "carol@acme.test")
    carol, _ = identity.add_member(orgs.acme_owner, "carol@acme.test")
    assert identity.login_principal(carol.id).name == "carol@acme.test"


def test_a_member_added_meanwhile_by_this_organization_is_already_exists(
    identity, orgs, monkeypatch
):
    between_check_and_insert(
        monkeypatch,
        # the last check before the user's insert: its email's is before
        "_account_name_free",
        lambda: identity.add_member(orgs.acme_owner, "eve@acme.test"),
    )
    with pytest.raises(AlreadyExists, match="already a member of this organization"):
        identity.add_member(orgs.acme_owner, "eve@acme.test")


def test_a_member_added_meanwhile_by_another_organization_is_refused_saying_nothing(
    identity, orgs, monkeypatch
):
    between_check_and_insert(
        monkeypatch,
        # the last check before the user's insert: its email's is before
        "_account_name_free",
        lambda: identity.add_member(orgs.acme_owner, "eve@x.test"),
    )
    with pytest.raises(FailedPrecondition) as refused:
        identity.add_member(orgs.globex_owner, "eve@x.test")
    assert str(refused.value) == EMAIL_UNAVAILABLE.format(email="eve@x.test")


def test_an_organization_created_meanwhile_is_already_exists(identity, orgs, monkeypatch):
    between_check_and_insert(
        monkeypatch,
        "_organization_name_free",
        lambda: identity.create_organization("initech", owner_email="a@initech.test"),
    )
    with pytest.raises(AlreadyExists, match="organization 'initech' already exists"):
        identity.create_organization("initech", owner_email="b@initech.test")


# -- the cluster's own accounts and the server's command line ----------------------------------


def test_a_service_account_is_named_apart_from_organizations_groups(identity, orgs):
    identity.create_account(orgs.acme_owner, "monitoring")
    accounts = identity.accounts
    _, token = accounts.create("monitoring", kind=AccountKind.MONITORING)
    assert accounts.authenticate(token).kind == AccountKind.MONITORING
    # the command line's issue-token finds the cluster's account, not the group
    assert accounts.authenticate(accounts.issue_token("monitoring")).kind == AccountKind.MONITORING


def test_a_service_account_name_is_unique_among_the_clusters_accounts(identity, orgs):
    with pytest.raises(AlreadyExists, match="'cluster-admin' already exists"):
        identity.accounts.create("cluster-admin", kind=AccountKind.ADMIN)


def test_a_service_account_created_meanwhile_is_already_exists(identity):
    ticks: list[None] = []

    def racing_clock() -> float:  # read between the name's check and the insert
        if not ticks:
            ticks.append(None)
            Accounts(identity.sessions).create("prometheus", kind=AccountKind.MONITORING)
        return 1_000_000.0

    racing = Accounts(identity.sessions, clock=racing_clock)
    with pytest.raises(AlreadyExists, match="'prometheus' already exists"):
        racing.create("prometheus", kind=AccountKind.MONITORING)


def test_the_command_line_asks_for_the_id_of_a_name_two_organizations_use(identity, orgs):
    identity.create_account(orgs.acme_owner, "lab")
    group = identity.create_account(orgs.globex_owner, "lab")
    with pytest.raises(FailedPrecondition, match="name the one meant by its id"):
        identity.accounts.issue_token("lab")
    token = identity.accounts.issue_token(group.id)
    assert identity.accounts.authenticate(token).account_id == group.id


def test_the_command_line_finds_the_one_organization_account_of_a_name(identity, orgs):
    identity.create_account(orgs.acme_owner, "lab")
    assert identity.accounts.revoke_all("lab") == 0
    with pytest.raises(NotFound, match="'nothing' not found"):
        identity.accounts.revoke_all("nothing")
