"""``fuzzball local up`` keeps its admin token and reuses it while it is valid, instead of
minting another on every ``up`` (which left every earlier one valid); what it keeps on disk
is its user's only.

The real ``up`` starts Orchestrate and Substrate (tests/e2e/test_local_deployment.py); here
``admin_token`` runs against the deployment's own database, as ``up`` calls it.
"""

from __future__ import annotations

import stat
import sys

import pytest

from fuzzball_core.cli import local
from fuzzball_core.cli.local import Deployment, admin_token
from fuzzball_core.config import parse_config
from fuzzball_core.errors import Unauthenticated
from fuzzball_core.service.accounts import Accounts
from fuzzball_core.store.database import connect, session_factory


@pytest.fixture
def config(tmp_path):
    return parse_config({"data-dir": str(tmp_path / "data")})


@pytest.fixture
def deployment(config) -> Deployment:
    deployment = local.deployment_for(config)
    deployment.directory.mkdir(parents=True)
    return deployment


def accounts(config) -> Accounts:
    return Accounts(session_factory(connect(config.database_url)))


def test_a_second_up_reuses_the_admin_token_of_the_first(config, deployment):
    first = admin_token(config, deployment)
    assert admin_token(config, deployment) == first


def test_the_first_up_creates_an_admin_account(config, deployment):
    who = accounts(config).authenticate(admin_token(config, deployment))
    assert (who.name, who.is_admin) == ("admin", True)


def test_the_local_contexts_token_is_reused_when_the_deployment_kept_none(config, deployment):
    first = admin_token(config, deployment)
    deployment.token_file.unlink()
    assert admin_token(config, deployment, known=first) == first


def test_a_revoked_admin_token_is_replaced_by_a_new_one(config, deployment):
    first = admin_token(config, deployment)
    accounts(config).revoke(first)
    second = admin_token(config, deployment)
    assert second != first
    assert accounts(config).authenticate(second).is_admin


def test_a_token_of_a_non_admin_is_not_taken_as_the_admins(config, deployment):
    admin_token(config, deployment)
    _, users = accounts(config).create("alice")
    deployment.token_file.write_text(users)
    assert admin_token(config, deployment) != users


def test_an_unknown_kept_token_is_replaced(config, deployment):
    deployment.token_file.write_text("from-another-database")
    token = admin_token(config, deployment)
    assert token != "from-another-database"
    with pytest.raises(Unauthenticated):
        accounts(config).authenticate("from-another-database")


def test_the_kept_token_is_the_owners_only(config, deployment):
    admin_token(config, deployment)
    assert stat.S_IMODE(deployment.token_file.stat().st_mode) == 0o600


class SleepingDeployment(Deployment):
    def argv(self, process: str) -> list[str]:
        return [sys.executable, "-c", "pass", "--config", str(self.config_file), process]


def test_a_process_log_is_the_owners_only(tmp_path):
    deployment = SleepingDeployment(tmp_path)
    local._start(deployment, "orchestrate").wait()
    assert stat.S_IMODE(deployment.log_file("orchestrate").stat().st_mode) == 0o600
