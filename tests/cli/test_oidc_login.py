"""``fuzzball context login`` (the device login by default, or a password), ``context
token``, ``context update-user --new-password``, and the API token renewed when it expires,
against Orchestrate's own OIDC issuer and account routes on loopback (support.oidc_stack).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from click.testing import CliRunner, Result
from sqlalchemy import select
from support.oidc_stack import PASSWORD, OidcStack, running_oidc_stack

from fuzzball_core.cli.main import cli
from fuzzball_core.errors import PermissionDenied, Unauthenticated
from fuzzball_core.store.models import OidcGrant

EMAIL = "ada@example.org"
NEW_PASSWORD = "Another-Horse-7-Staple"


class Fuzzball:
    """``fuzzball ARGS`` in-process, with its own config home."""

    def __init__(self, home: Path) -> None:
        self.home = home

    def __call__(self, *args: str, input: str | None = None) -> Result:
        return CliRunner().invoke(
            cli, list(args), input=input, env={"XDG_CONFIG_HOME": str(self.home)}
        )

    @property
    def context(self) -> dict:
        document = yaml.safe_load((self.home / "fuzzball" / "config.yaml").read_text())
        return document["contexts"][0]


@pytest.fixture
def oidc(tmp_path) -> Iterator[OidcStack]:
    # a one-second polling interval, so that the device login's polls come quickly
    with running_oidc_stack(tmp_path, poll_interval=1) as stack:
        yield stack


@pytest.fixture
def ada(oidc):
    return oidc.organization("lab", EMAIL)


@pytest.fixture
def fuzzball(oidc, tmp_path) -> Fuzzball:
    run = Fuzzball(tmp_path / "home")
    result = run(
        "context", "create", "lab", "--address", oidc.url, "--oidc-server-url", oidc.issuer_url
    )
    assert result.exit_code == 0, result.output
    return run


@pytest.fixture
def logged_in(fuzzball, ada) -> Fuzzball:
    result = fuzzball("context", "login", "--username", EMAIL, "--password", PASSWORD)
    assert result.exit_code == 0, result.output
    return fuzzball


def approve_when_asked(oidc: OidcStack, action: str = "approve") -> threading.Thread:
    """A person who, once a device login waits, approves (or denies) its code on the page."""

    def person() -> None:
        for _ in range(600):
            with oidc.stack.engine.sessions() as session:
                code = session.scalars(
                    select(OidcGrant.user_code).where(OidcGrant.grant == "device")
                ).first()
            if code:
                form = {
                    "user_code": code,
                    "username": EMAIL,
                    "password": PASSWORD,
                    "action": action,
                }
                httpx.post(oidc.approval_url, data=form)
                return
            threading.Event().wait(0.05)

    thread = threading.Thread(target=person, daemon=True)
    thread.start()
    return thread


def test_password_login_keeps_the_personal_accounts_token_and_the_refresh_token(
    oidc, ada, logged_in
):
    context = logged_in.context
    personal = oidc.service.identity.login_principal(ada.id).account_id
    token = context["auth"]["credentials"]["token"]
    who = oidc.service.authenticate(token)
    assert (who.account_id, who.user_id, who.credential) == (personal, ada.id, "api")
    assert context["auth"]["credentials"]["refreshToken"]
    assert context["currentaccountid"] == personal
    assert context["accounts"] == [{"accountid": personal, "accountalias": EMAIL}]


def test_password_login_prompts_for_the_password_hidden(fuzzball, ada):
    result = fuzzball("context", "login", "--username", EMAIL, input=f"{PASSWORD}\n")
    assert result.exit_code == 0, result.output
    assert PASSWORD not in result.output
    assert f"as {EMAIL}" in result.output


def test_a_refused_login_names_the_reason_but_not_the_password(fuzzball, ada):
    result = fuzzball("context", "login", "--username", EMAIL, "--password", "Wrong-pass-99!")
    assert isinstance(result.exception, Unauthenticated)
    assert "invalid email or password" in str(result.exception)
    assert "Wrong-pass-99!" not in str(result.exception)
    assert fuzzball.context["auth"]["credentials"]["token"] == ""


def test_login_works_in_the_contexts_current_account(oidc, ada, fuzzball):
    owner = oidc.service.identity.login_principal(ada.id)
    group = oidc.service.identity.create_account(owner, "team")
    contexts_file = fuzzball.home / "fuzzball" / "config.yaml"
    document = yaml.safe_load(contexts_file.read_text())
    document["contexts"][0]["currentaccountid"] = group.id
    contexts_file.write_text(yaml.safe_dump(document))
    result = fuzzball("context", "login", "--username", EMAIL, "--password", PASSWORD)
    assert result.exit_code == 0, result.output
    token = fuzzball.context["auth"]["credentials"]["token"]
    assert oidc.service.authenticate(token).account_id == group.id


def test_device_login_shows_the_code_and_keeps_the_token_once_approved(oidc, ada, fuzzball):
    person = approve_when_asked(oidc)
    result = fuzzball("context", "login")
    person.join()
    assert result.exit_code == 0, result.output
    assert f"open {oidc.approval_url}?user_code=" in result.output
    assert "enter the code" in result.output
    token = fuzzball.context["auth"]["credentials"]["token"]
    assert oidc.service.authenticate(token).user_id == ada.id
    assert fuzzball.context["auth"]["credentials"]["refreshToken"]


def test_a_denied_device_login_keeps_nothing(oidc, ada, fuzzball):
    person = approve_when_asked(oidc, "deny")
    result = fuzzball("context", "login")
    person.join()
    assert isinstance(result.exception, PermissionDenied)
    assert "denied" in str(result.exception)
    assert fuzzball.context["auth"]["credentials"]["token"] == ""


def test_context_token_prints_the_api_token(logged_in):
    result = logged_in("context", "token")
    assert result.exit_code == 0, result.output
    assert result.output.strip() == logged_in.context["auth"]["credentials"]["token"]


def test_context_token_without_a_login_says_how_to_log_in(fuzzball):
    result = fuzzball("context", "token")
    assert result.exit_code != 0
    assert "fuzzball context login" in str(result.exception)


def test_an_expired_api_token_is_renewed_once_and_kept(oidc, ada, fuzzball):
    oidc.service.accounts.token_lifetime = 3600.0
    result = fuzzball("context", "login", "--username", EMAIL, "--password", PASSWORD)
    assert result.exit_code == 0, result.output
    before = fuzzball.context["auth"]["credentials"]
    oidc.clock.advance(3601)
    result = fuzzball("workflow", "list")
    assert result.exit_code == 0, result.output
    after = fuzzball.context["auth"]["credentials"]
    assert after["token"] != before["token"]
    assert after["refreshToken"] != before["refreshToken"]
    assert oidc.service.authenticate(after["token"]).user_id == ada.id


def test_an_expired_token_that_cannot_be_renewed_says_to_log_in(oidc, ada, fuzzball):
    oidc.service.accounts.token_lifetime = 3600.0
    fuzzball("context", "login", "--username", EMAIL, "--password", PASSWORD)
    oidc.clock.advance(31 * 24 * 3600)  # past the refresh token's 30 days too
    result = fuzzball("workflow", "list")
    assert isinstance(result.exception, Unauthenticated)
    assert "fuzzball context login" in str(result.exception)


def test_a_token_given_by_hand_is_not_renewed_with_an_old_login(logged_in):
    result = logged_in("context", "login", "--token", "by-hand")
    assert result.exit_code == 0, result.output
    assert logged_in.context["auth"]["credentials"] == {"token": "by-hand"}


def test_update_user_changes_the_password(oidc, logged_in):
    answers = f"{PASSWORD}\n{NEW_PASSWORD}\n{NEW_PASSWORD}\n"
    result = logged_in("context", "update-user", "--new-password", input=answers)
    assert result.exit_code == 0, result.output
    assert NEW_PASSWORD not in result.output
    refused = httpx.post(oidc.token_url, data=oidc.password_form(EMAIL, PASSWORD))
    assert refused.status_code == 400
    accepted = httpx.post(oidc.token_url, data=oidc.password_form(EMAIL, NEW_PASSWORD))
    assert accepted.status_code == 200
    assert "refreshToken" not in logged_in.context["auth"]["credentials"]
    assert "fuzzball context login" in result.output


def test_update_user_shows_the_policy_rules_a_new_password_breaks(logged_in):
    answers = f"{PASSWORD}\nshort\nshort\n"
    result = logged_in("context", "update-user", "--new-password", input=answers)
    assert result.exit_code != 0
    message = str(result.exception)
    assert "at least 12 characters" in message
    assert "it must contain a digit" in message


def test_update_user_needs_to_be_told_what_to_update(logged_in):
    result = logged_in("context", "update-user")
    assert result.exit_code == 2
    assert "--new-password" in result.output


def test_a_user_whose_password_was_reset_chooses_one_while_logging_in(oidc, ada, fuzzball):
    owner = oidc.service.identity.login_principal(ada.id)
    bob, _ = oidc.service.identity.add_member(
        owner, "bob@example.org", password=PASSWORD, require_update=True
    )
    result = fuzzball(
        "context",
        "login",
        "--username",
        bob.email,
        "--password",
        PASSWORD,
        input=f"{NEW_PASSWORD}\n{NEW_PASSWORD}\n",
    )
    assert result.exit_code == 0, repr(result.exception)
    assert "choose a new one" in result.output
    assert NEW_PASSWORD not in result.output
    token = fuzzball.context["auth"]["credentials"]["token"]
    assert oidc.service.authenticate(token).user_id == bob.id
    refresh = fuzzball.context["auth"]["credentials"]["refreshToken"]
    form = {"client_id": "fuzzball-cli", "grant_type": "refresh_token", "refresh_token": refresh}
    renewed = httpx.post(oidc.token_url, data=form)
    assert renewed.status_code == 200, renewed.text  # the login after the change, not before
