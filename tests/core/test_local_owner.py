"""``fuzzball local up`` creates the first organization and its owner once, and leaves the
``local`` context signed in as the owner; what it keeps on disk is its user's only.

The real ``up`` starts Orchestrate and Substrate (tests/e2e/test_local_deployment.py); here
``sign_in_owner`` runs against the deployment's own database, as ``up`` calls it.
"""

from __future__ import annotations

import stat

import pytest
from sqlalchemy import select

from fuzzball_core.cli.contexts import Context, ContextsFile
from fuzzball_core.cli.local import Deployment, admin_token
from fuzzball_core.cli.local_owner import password_file, sign_in_owner
from fuzzball_core.config import parse_config
from fuzzball_core.service.accounts import Accounts
from fuzzball_core.service.audit import AuditLog
from fuzzball_core.service.identity import Identity
from fuzzball_core.store.database import connect, session_factory
from fuzzball_core.store.models import Organization
from fuzzball_core.vocabulary import CredentialKind, OrganizationRole

ADDRESS = "https://127.0.0.1:8080"


@pytest.fixture
def config(tmp_path):
    return parse_config({"data-dir": str(tmp_path / "data")})


@pytest.fixture
def directory(config):
    directory = config.data_dir / "local"
    directory.mkdir(parents=True)
    return directory


@pytest.fixture
def admin(config, directory) -> str:
    """The deployment's admin token, as ``up`` makes it before signing the owner in."""
    return admin_token(config, Deployment(directory))


@pytest.fixture
def context(tmp_path) -> Context:
    return ContextsFile(tmp_path / "config.yaml", {}).create("local", ADDRESS)


def identity(config) -> Identity:
    sessions = session_factory(connect(config.database_url))
    return Identity(sessions, Accounts(sessions), AuditLog(sessions))


def test_the_first_up_creates_the_organization_and_its_owner(config, directory, context, admin):
    signed = sign_in_owner(config, directory, context, ADDRESS, admin)
    who = identity(config).accounts.authenticate(context.token)
    assert (signed.organization, signed.email) == ("local", "admin@local")
    assert who.is_admin  # the one running the machine runs the cluster
    assert (who.email, who.role, who.credential) == (
        "admin@local",
        OrganizationRole.OWNER,
        CredentialKind.API,
    )


def test_the_context_holds_what_the_real_cli_keeps(config, directory, context, admin):
    sign_in_owner(config, directory, context, ADDRESS, admin)
    who = identity(config).accounts.authenticate(context.token)
    assert context.address == ADDRESS
    assert context.oidc_server_url == f"{ADDRESS}/auth/realms/fuzzball"
    assert context.current_account_id == who.account_id
    assert context.accounts == [{"accountid": who.account_id, "accountalias": "admin@local"}]
    assert context.refresh_token


def test_the_generated_password_is_shown_once_and_kept_owner_only(
    config, directory, context, admin
):
    first = sign_in_owner(config, directory, context, ADDRESS, admin)
    kept = password_file(directory)
    assert first.generated_password
    assert kept.read_text().strip() == first.generated_password
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert sign_in_owner(config, directory, context, ADDRESS, admin).generated_password is None


def test_the_kept_password_signs_the_owner_in(config, directory, context, admin):
    first = sign_in_owner(config, directory, context, ADDRESS, admin)
    user = identity(config).check_password("admin@local", first.generated_password)
    assert user.email == "admin@local"


def test_a_second_up_keeps_the_organization_owner_and_valid_token(
    config, directory, context, admin
):
    sign_in_owner(config, directory, context, ADDRESS, admin)
    token = context.token
    again = sign_in_owner(config, directory, context, ADDRESS, admin)
    assert again.email == "admin@local"
    assert context.token == token
    with identity(config).sessions() as session:
        assert session.scalars(select(Organization.name)).all() == ["local"]


def test_a_revoked_token_is_replaced_by_signing_in_again(config, directory, context, admin):
    sign_in_owner(config, directory, context, ADDRESS, admin)
    revoked = context.token
    identity(config).accounts.revoke(revoked)
    signed = sign_in_owner(config, directory, context, ADDRESS, admin)
    assert not signed.problem
    assert context.token != revoked
    assert identity(config).accounts.authenticate(context.token).email == "admin@local"


def test_an_owner_who_changed_the_password_is_told_to_log_in(config, directory, context, admin):
    sign_in_owner(config, directory, context, ADDRESS, admin)
    owners = identity(config)
    who = owners.accounts.authenticate(context.token)
    owners.change_password(
        who,
        current_password=password_file(directory).read_text().strip(),
        new_password="Chosen-by-the-owner-7",
    )
    owners.accounts.revoke(context.token)
    signed = sign_in_owner(config, directory, context, ADDRESS, admin)
    assert "fuzzball context login" in signed.problem
    assert context.token == ""


def test_the_organization_and_owner_may_be_named(config, directory, context, admin):
    signed = sign_in_owner(
        config,
        directory,
        context,
        ADDRESS,
        admin,
        organization="lab",
        owner_email="ada@example.org",
    )
    assert (signed.organization, signed.email) == ("lab", "ada@example.org")
    assert identity(config).accounts.authenticate(context.token).email == "ada@example.org"
