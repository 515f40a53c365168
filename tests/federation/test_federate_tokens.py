"""Federate's accounts go through the same token store as Orchestrate's: kinds set at
creation, tokens that expire and can be revoked, and revision f0002 giving existing rows
their kind and lifetime."""

from __future__ import annotations

import time

import pytest
from click.testing import CliRunner
from sqlalchemy import text

from fuzzball_core.errors import Unauthenticated
from fuzzball_core.store.database import connect, migrate
from fuzzball_core.vocabulary import AccountKind
from fuzzball_federation import main
from fuzzball_federation.models import MIGRATIONS

DAYS_90 = 90 * 24 * 3600


def test_a_revoked_federate_token_is_unauthenticated_over_the_api(federation):
    client = federation.client()
    client.list_workflows()
    federation.service.revoke_token(federation.token)
    with pytest.raises(Unauthenticated, match="revoked"):
        client.list_workflows()


def test_federates_create_account_sets_the_kind_and_revoke_token_revokes(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(f"data-dir: {tmp_path / 'data'}\n")
    runner = CliRunner()
    created = runner.invoke(
        main.cli, ["--config", str(config), "create-account", "ops", "--kind", "admin"]
    )
    assert created.exit_code == 0, created.output
    token = created.output.strip()
    _, service = main._service(str(config))
    assert service.authenticate(token).kind == AccountKind.ADMIN
    revoked = runner.invoke(main.cli, ["--config", str(config), "revoke-token"], input=token)
    assert revoked.exit_code == 0, revoked.output
    with pytest.raises(Unauthenticated):
        service.authenticate(token)


def test_upgrading_to_f0002_gives_admins_their_kind_and_tokens_a_lifetime(database_url):
    engine = connect(database_url)
    migrate(engine, "f0001", migrations=MIGRATIONS)
    issued = time.time() - 10_000
    with engine.begin() as connection:
        for account_id, admin in (("a1", False), ("a2", True)):
            connection.execute(
                text(
                    "INSERT INTO federate_accounts (id, name, is_admin, created_at)"
                    " VALUES (:id, :id, :admin, 1)"
                ),
                {"id": account_id, "admin": admin},
            )
            connection.execute(
                text(
                    "INSERT INTO federate_api_tokens (account_id, token_sha256, created_at)"
                    " VALUES (:id, :id, :issued)"
                ),
                {"id": account_id, "issued": issued},
            )
    migrate(engine, "f0002", migrations=MIGRATIONS)
    with engine.connect() as connection:
        kinds = dict(connection.execute(text("SELECT id, kind FROM federate_accounts")).all())
        ends = connection.execute(text("SELECT expires_at FROM federate_api_tokens")).scalars()
        assert set(ends) == {issued + DAYS_90}
    assert kinds == {"a1": "user", "a2": "admin"}
