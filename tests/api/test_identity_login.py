"""Signing in with a password, with a clock the test moves (on SQLite, and on PostgreSQL as
well where the stores could differ): five failures in a row lock the user out for 15 minutes
(the sixth attempt refused even with the right password, saying until when), unknown users
and wrong passwords get one answer, and every login, failure and lockout is in the audit log,
which pages, orders and filters."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from fuzzball_core.errors import (
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Unauthenticated,
)
from fuzzball_core.service.accounts import Accounts
from fuzzball_core.service.audit import AuditLog, AuditQuery
from fuzzball_core.service.identity import (
    BAD_CREDENTIALS,
    LOCKOUT_SECONDS,
    UNKNOWN_EMAIL,
    Identity,
)
from fuzzball_core.store.database import connect, migrate, session_factory
from fuzzball_core.vocabulary import AuditAction, CredentialKind

PASSWORD, WRONG = "Sturdy-Lantern-42x", "Wrong-Lantern-42x"
EMAIL = "dev@acme.test"
START = 1_800_000_000.0  # 2027-01-15T08:00:00Z


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def built(url: str, clock: Clock) -> Iterator[Identity]:
    """Identity over a migrated store at ``url``, with organization acme, its owner and
    the member signing in here."""
    engine = connect(url)
    migrate(engine)
    sessions = session_factory(engine)
    made = Identity(sessions, Accounts(sessions, clock=clock), AuditLog(sessions, clock), clock)
    _, owner, _ = made.create_organization(
        "acme", owner_email="owner@acme.test", owner_password=PASSWORD
    )
    made.add_member(made.login_principal(owner.id), EMAIL, password=PASSWORD)
    yield made
    engine.dispose()


@pytest.fixture
def identity(tmp_path, clock) -> Iterator[Identity]:
    """On SQLite."""
    yield from built(f"sqlite:///{tmp_path / 'store.db'}", clock)


@pytest.fixture
def identity_on_both(database_url, clock) -> Iterator[Identity]:
    """On SQLite, then on PostgreSQL: what the stores could do differently (counting
    concurrent failures, refusing NULs, filtering)."""
    yield from built(database_url, clock)


def fail(identity: Identity, times: int, email: str = EMAIL) -> list[str]:
    messages = []
    for _ in range(times):
        with pytest.raises(Unauthenticated) as refused:
            identity.check_password(email, WRONG)
        messages.append(str(refused.value))
    return messages


def actions(identity: Identity, **query) -> list[str]:
    page = identity.audit.query(AuditQuery(actor=EMAIL, oldest_first=True, **query))
    return [entry.action for entry in page.entries]


def test_the_right_password_signs_in_and_records_when(identity, clock):
    user = identity.check_password(EMAIL, PASSWORD)
    assert (user.email, user.last_login_at) == (EMAIL, START)


def test_the_email_is_matched_without_regard_to_case(identity):
    assert identity.check_password("Dev@ACME.test", PASSWORD).email == EMAIL


def test_a_wrong_password_and_an_unknown_user_get_the_same_answer(identity):
    assert fail(identity, 1) == fail(identity, 1, "nobody@acme.test") == [BAD_CREDENTIALS]


def test_four_failures_do_not_lock(identity):
    fail(identity, 4)
    assert identity.check_password(EMAIL, PASSWORD).email == EMAIL


def test_the_sixth_attempt_is_refused_even_with_the_right_password(identity_on_both):
    fail(identity_on_both, 5)
    with pytest.raises(Unauthenticated) as refused:
        identity_on_both.check_password(EMAIL, PASSWORD)
    message = str(refused.value)
    assert "locked out" in message
    assert "until 2027-01-15T08:15:00Z" in message


def test_the_lockout_lasts_fifteen_minutes_from_the_fifth_failure(identity, clock):
    fail(identity, 5)
    clock.now = START + LOCKOUT_SECONDS - 1
    with pytest.raises(Unauthenticated, match="locked out"):
        identity.check_password(EMAIL, PASSWORD)


def test_after_fifteen_minutes_the_right_password_signs_in(identity_on_both, clock):
    fail(identity_on_both, 5)
    clock.now = START + LOCKOUT_SECONDS
    assert identity_on_both.check_password(EMAIL, PASSWORD).last_login_at == clock.now


def test_after_a_lockout_the_count_starts_again(identity, clock):
    fail(identity, 5)
    clock.now = START + LOCKOUT_SECONDS
    fail(identity, 4)
    assert identity.check_password(EMAIL, PASSWORD).email == EMAIL


def test_a_good_sign_in_resets_the_count(identity):
    fail(identity, 4)
    identity.check_password(EMAIL, PASSWORD)
    fail(identity, 4)
    assert identity.check_password(EMAIL, PASSWORD).email == EMAIL


def test_an_owners_password_reset_ends_the_lockout(identity):
    fail(identity, 5)
    owner = identity.login_principal(identity.check_password("owner@acme.test", PASSWORD).id)
    user = next(u for u in identity.list_members(owner) if u.email == EMAIL)
    identity.reset_password(owner, user.id, new_password="Fresh-Lantern-43y")
    assert identity.check_password(EMAIL, "Fresh-Lantern-43y").email == EMAIL


def test_failures_the_lockout_and_logins_are_audited(identity_on_both, clock):
    fail(identity_on_both, 5)
    fail(identity_on_both, 1)  # while locked
    clock.now = START + LOCKOUT_SECONDS
    identity_on_both.check_password(EMAIL, PASSWORD, source="127.0.0.1")
    assert actions(identity_on_both) == ["login_failed"] * 5 + [
        "locked_out",
        "login_failed",
        "login",
    ]
    login = identity_on_both.audit.query(AuditQuery(action=AuditAction.LOGIN, actor=EMAIL)).entries[
        0
    ]
    assert (login.outcome, login.source, login.at) == ("ok", "127.0.0.1", clock.now)
    locked = identity_on_both.audit.query(AuditQuery(action=AuditAction.LOCKED_OUT)).entries[0]
    assert (locked.outcome, locked.detail) == ("denied", {"until": "2027-01-15T08:15:00Z"})


def test_no_audit_entry_holds_the_password_tried(identity):
    fail(identity, 2)
    identity.check_password(EMAIL, PASSWORD)
    entries = identity.audit.query(AuditQuery(page_size=500)).entries
    assert all(WRONG not in repr(e) and PASSWORD not in repr(e) for e in entries)


def test_a_sign_in_acts_in_the_users_personal_account_with_a_login_credential(identity):
    user = identity.check_password(EMAIL, PASSWORD)
    who = identity.login_principal(user.id)
    assert (who.name, who.user_id, who.credential) == (EMAIL, user.id, CredentialKind.LOGIN)
    assert who.organization_id == user.organization_id


def test_a_workflows_token_may_not_choose_an_account(identity):
    who = identity.login_principal(identity.check_password(EMAIL, PASSWORD).id)
    as_workflow = replace(who, credential=CredentialKind.WORKFLOW, permissions=frozenset())
    with pytest.raises(PermissionDenied):
        identity.account_token(as_workflow, who.account_id)


# -- the audit log's queries ------------------------------------------------------------------


def test_the_audit_log_is_newest_first_unless_asked(identity):
    fail(identity, 1)
    identity.check_password(EMAIL, PASSWORD)
    newest = identity.audit.query(AuditQuery(actor=EMAIL)).entries
    assert [e.action for e in newest] == ["login", "login_failed"]
    assert newest[0].seq > newest[1].seq


def test_the_audit_log_filters_by_time(identity_on_both, clock):
    fail(identity_on_both, 1)
    clock.now = START + 60
    identity_on_both.check_password(EMAIL, PASSWORD)
    assert actions(identity_on_both, since=START + 30) == ["login"]
    assert actions(identity_on_both, until=START + 30) == ["login_failed"]


def test_the_audit_log_filters_by_outcome_and_organization(identity_on_both):
    fail(identity_on_both, 1)
    identity_on_both.check_password(EMAIL, PASSWORD)
    assert actions(identity_on_both, outcome="denied") == ["login_failed"]
    organization = identity_on_both.check_password(EMAIL, PASSWORD).organization_id
    assert {e.organization_id for e in identity_on_both.audit.query(AuditQuery()).entries} == {
        organization
    }
    assert identity_on_both.audit.query(AuditQuery(organization_id="elsewhere")).entries == ()


def test_the_audit_log_pages_without_repeating_or_skipping(identity_on_both):
    fail(identity_on_both, 4)
    seen, token = [], ""
    while True:
        page = identity_on_both.audit.query(AuditQuery(actor=EMAIL, page_size=3, page_token=token))
        seen += [e.seq for e in page.entries]
        token = page.next_page_token
        if not token:
            break
    assert seen == sorted(seen, reverse=True) and len(seen) == len(set(seen)) == 4


@pytest.mark.parametrize(
    "query",
    [
        AuditQuery(action="logged_in"),
        AuditQuery(outcome="maybe"),
        AuditQuery(page_size=501),
        AuditQuery(page_token="abc"),
    ],
)
def test_a_bad_audit_query_is_refused(identity, query):
    with pytest.raises(InvalidArgument):
        identity.audit.query(query)


def test_an_audit_detail_naming_a_password_is_refused(identity):
    with pytest.raises(ValueError, match="never logged"):
        identity.audit.record(AuditAction.LOGIN, detail={"new_password": "x"})


def test_a_user_who_must_choose_a_new_password_gets_no_account_token_until_they_do(identity):
    owner = identity.login_principal(identity.check_password("owner@acme.test", PASSWORD).id)
    user, _ = identity.add_member(owner, "temp@acme.test", password=PASSWORD, require_update=True)
    who = identity.login_principal(user.id)
    with pytest.raises(FailedPrecondition, match="must choose a new password"):
        identity.account_token(who, who.account_id)
    identity.change_password(who, current_password=PASSWORD, new_password="Chosen-Lantern-44z")
    assert identity.accounts.authenticate(identity.account_token(who, who.account_id)).user_id


def test_an_email_holding_a_nul_is_an_unknown_users_refusal(identity_on_both):
    assert fail(identity_on_both, 1, "dev\x00@acme.test") == [BAD_CREDENTIALS]
    failed = identity_on_both.audit.query(AuditQuery(action=AuditAction.LOGIN_FAILED)).entries[0]
    assert failed.actor == UNKNOWN_EMAIL


def test_a_password_typed_into_the_email_field_stays_out_of_the_audit_log(identity):
    fail(identity, 1, email=PASSWORD)
    failed = identity.audit.query(AuditQuery(action=AuditAction.LOGIN_FAILED)).entries[0]
    assert (failed.actor, failed.target) == (UNKNOWN_EMAIL, f"user {UNKNOWN_EMAIL}")
    assert PASSWORD not in repr(failed)


def test_a_known_users_failed_sign_in_is_audited_under_their_email(identity):
    fail(identity, 1, email="Dev@ACME.test")
    failed = identity.audit.query(AuditQuery(action=AuditAction.LOGIN_FAILED)).entries[0]
    assert (failed.actor, failed.target) == (EMAIL, f"user {EMAIL}")


def test_an_id_holding_a_nul_is_not_found(identity_on_both):
    owner = identity_on_both.login_principal(
        identity_on_both.check_password("owner@acme.test", PASSWORD).id
    )
    with pytest.raises(NotFound):
        identity_on_both.get_member(owner, "\x00")
    with pytest.raises(NotFound):
        identity_on_both.get_account(owner, "1\x00")


def test_a_workflows_token_may_not_change_its_users_password(identity):
    who = identity.login_principal(identity.check_password(EMAIL, PASSWORD).id)
    as_workflow = replace(who, credential=CredentialKind.WORKFLOW, permissions=frozenset())
    with pytest.raises(PermissionDenied):
        identity.change_password(
            as_workflow, current_password=PASSWORD, new_password="Chosen-Lantern-44z"
        )
    assert identity.check_password(EMAIL, PASSWORD).email == EMAIL


def test_a_password_change_records_no_sign_in(identity, clock):
    owner = identity.login_principal(identity.check_password("owner@acme.test", PASSWORD).id)
    member = identity.check_password(EMAIL, PASSWORD)
    clock.now = START + 60
    identity.change_password(
        identity.login_principal(member.id),
        current_password=PASSWORD,
        new_password="Chosen-Lantern-44z",
    )
    # the sign-in above, then the change: the current password it checked is no sign-in
    assert actions(identity) == [AuditAction.LOGIN, AuditAction.PASSWORD_CHANGED]
    assert identity.get_member(owner, member.id).last_login_at == START


def test_a_new_password_the_policy_refuses_records_no_sign_in(identity, clock):
    owner = identity.login_principal(identity.check_password("owner@acme.test", PASSWORD).id)
    member = identity.check_password(EMAIL, PASSWORD)
    clock.now = START + 60
    with pytest.raises(InvalidArgument, match="password policy"):
        identity.change_password(
            identity.login_principal(member.id), current_password=PASSWORD, new_password="x"
        )
    assert actions(identity) == [AuditAction.LOGIN]  # the sign-in above, no other
    assert identity.get_member(owner, member.id).last_login_at == START
