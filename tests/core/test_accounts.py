"""Accounts and their tokens (the token store Orchestrate and Federate share): a token expires
after the configured lifetime and can be revoked, either way Unauthenticated saying which; an
account's kind is set when it is created, never taken from its name.

Before, tokens never expired, nothing revoked one, and the account named "monitoring" placed
holds as monitoring whatever it was.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from fuzzball_core.config import DEFAULT_TOKEN_LIFETIME, parse_config
from fuzzball_core.errors import InvalidArgument, NotFound, Unauthenticated
from fuzzball_core.orchestrate import server
from fuzzball_core.service.accounts import Accounts
from fuzzball_core.store.database import connect, migrate, session_factory
from fuzzball_core.vocabulary import AccountKind
from fuzzball_plugins.schedulers.default import DefaultScheduler

HOUR = 3600.0


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def accounts(database_url, clock) -> Accounts:
    engine = connect(database_url)
    migrate(engine)
    return Accounts(session_factory(engine), token_lifetime=HOUR, clock=clock)


# -- expiry ---------------------------------------------------------------------------------


def test_a_token_is_accepted_until_its_lifetime_ends(accounts, clock):
    _, token = accounts.create("alice")
    clock.now += HOUR - 1
    assert accounts.authenticate(token).name == "alice"


def test_a_token_past_its_lifetime_is_unauthenticated_saying_it_expired(accounts, clock):
    _, token = accounts.create("alice")
    clock.now += HOUR
    with pytest.raises(Unauthenticated, match="expired at 1970-01-12T14:46:40Z"):
        accounts.authenticate(token)


def test_an_issued_token_lives_its_own_lifetime_from_when_it_was_issued(accounts, clock):
    _, first = accounts.create("alice")
    clock.now += HOUR / 2
    second = accounts.issue_token("alice")
    clock.now += HOUR / 2
    with pytest.raises(Unauthenticated):
        accounts.authenticate(first)
    assert accounts.authenticate(second).name == "alice"


def test_the_lifetime_is_configured_under_accounts_token_lifetime():
    assert parse_config({"accounts": {"token-lifetime": "12h"}}).accounts.token_lifetime == 43200
    assert parse_config({}).accounts.token_lifetime == DEFAULT_TOKEN_LIFETIME


def test_orchestrate_issues_tokens_with_the_configured_lifetime(tmp_path):
    config = parse_config({"data-dir": str(tmp_path), "accounts": {"token-lifetime": "2h"}})
    built = server.build(config, DefaultScheduler())
    assert built.service.accounts.token_lifetime == 2 * HOUR


# -- revocation -----------------------------------------------------------------------------


def test_a_revoked_token_is_unauthenticated_saying_it_was_revoked(accounts):
    _, token = accounts.create("alice")
    accounts.revoke(token)
    with pytest.raises(Unauthenticated, match="revoked"):
        accounts.authenticate(token)


def test_revoking_one_token_leaves_the_accounts_others_valid(accounts):
    _, first = accounts.create("alice")
    second = accounts.issue_token("alice")
    accounts.revoke(first)
    assert accounts.authenticate(second).name == "alice"


def test_revoking_an_unknown_token_is_not_found(accounts):
    with pytest.raises(NotFound):
        accounts.revoke("no-such-token")


def test_revoking_an_account_revokes_every_token_of_it_and_no_other(accounts):
    _, first = accounts.create("alice")
    second = accounts.issue_token("alice")
    _, bobs = accounts.create("bob")
    assert accounts.revoke_all("alice") == 2
    for token in (first, second):
        with pytest.raises(Unauthenticated):
            accounts.authenticate(token)
    assert accounts.authenticate(bobs).name == "bob"


# -- kinds ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(AccountKind))
def test_an_account_has_the_kind_it_was_created_with(accounts, kind):
    _, token = accounts.create("svc", kind=kind)
    who = accounts.authenticate(token)
    assert (who.kind, who.is_admin) == (kind, kind == AccountKind.ADMIN)


def test_an_account_named_like_a_service_is_a_user_unless_created_as_one(accounts):
    _, token = accounts.create("monitoring")
    assert accounts.authenticate(token).kind == AccountKind.USER


def test_admin_true_creates_an_admin(accounts):
    principal, _ = accounts.create("root", admin=True)
    assert (principal.kind, principal.is_admin) == (AccountKind.ADMIN, True)


def test_an_unknown_kind_is_invalid_naming_the_kinds(accounts):
    with pytest.raises(InvalidArgument, match="admin, monitoring, provisioner, user"):
        accounts.create("x", kind="operator")


# -- the commands ---------------------------------------------------------------------------


@pytest.fixture
def orchestrate_cli(tmp_path):
    """``fuzzball-orchestrate ARGS`` on a configuration of its own; (exit code, output)."""
    config = tmp_path / "config.yaml"
    config.write_text(f"data-dir: {tmp_path / 'data'}\n")

    def run(*args: str, stdin: str | None = None):
        result = CliRunner().invoke(server.cli, ["--config", str(config), *args], input=stdin)
        return result.exit_code, result.output

    return run


def _who(tmp_path, token: str):
    config = parse_config({"data-dir": str(tmp_path / "data")})
    return server.build(config, DefaultScheduler()).service.authenticate(token)


def test_create_account_sets_the_kind_it_is_given(orchestrate_cli, tmp_path):
    code, output = orchestrate_cli("create-account", "watcher", "--kind", "monitoring")
    assert code == 0, output
    assert _who(tmp_path, output.strip()).kind == AccountKind.MONITORING


def test_revoke_token_reads_the_token_from_stdin(orchestrate_cli, tmp_path):
    _, token = orchestrate_cli("create-account", "alice")
    code, output = orchestrate_cli("revoke-token", stdin=token)
    assert (code, output) == (0, "Revoked the token.\n")
    with pytest.raises(Unauthenticated, match="revoked"):
        _who(tmp_path, token.strip())


def test_revoke_token_of_an_account_revokes_all_of_its_tokens(orchestrate_cli, tmp_path):
    orchestrate_cli("create-account", "alice")
    orchestrate_cli("issue-token", "alice")
    code, output = orchestrate_cli("revoke-token", "--account", "alice")
    assert (code, output) == (0, "Revoked 2 tokens of account alice.\n")
