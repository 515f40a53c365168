"""``fuzzball-orchestrate create-organization``: the first organization and its owner, made on
the server's own machine before anyone can sign in."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from fuzzball_core.config import parse_config
from fuzzball_core.orchestrate import server
from fuzzball_core.vocabulary import OrganizationRole
from fuzzball_plugins.schedulers.default import DefaultScheduler

PASSWORD = "Sturdy-Lantern-42x"


@pytest.fixture
def orchestrate_cli(tmp_path):
    """``fuzzball-orchestrate ARGS`` on a configuration of its own; the click result."""
    config = tmp_path / "config.yaml"
    config.write_text(f"data-dir: {tmp_path / 'data'}\n")

    def run(*args: str, stdin: str | None = None):
        return CliRunner().invoke(server.cli, ["--config", str(config), *args], input=stdin)

    return run


def identity(tmp_path):
    config = parse_config({"data-dir": str(tmp_path / "data")})
    return server.build(config, DefaultScheduler()).service.identity


def test_the_owner_signs_in_with_the_generated_password_printed_once(orchestrate_cli, tmp_path):
    result = orchestrate_cli("create-organization", "acme", "--owner-email", "boss@acme.test")
    assert result.exit_code == 0, result.output
    password = result.output.splitlines()[-1].rpartition(": ")[2]
    owner = identity(tmp_path).check_password("boss@acme.test", password)
    assert owner.role == OrganizationRole.OWNER


def test_the_owners_password_is_read_from_stdin(orchestrate_cli, tmp_path):
    result = orchestrate_cli(
        "create-organization", "acme", "--owner-email", "boss@acme.test",
        "--owner-password-stdin", stdin=PASSWORD + "\n",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "Generated" not in result.output
    assert identity(tmp_path).check_password("boss@acme.test", PASSWORD).email == "boss@acme.test"


def test_a_password_breaking_the_policy_is_refused(orchestrate_cli):
    result = orchestrate_cli(
        "create-organization", "acme", "--owner-email", "boss@acme.test",
        "--owner-password-stdin", stdin="acme\n",
    )  # fmt: skip
    assert "12 characters" in str(result.exception)


def test_an_organization_name_is_taken_once(orchestrate_cli):
    orchestrate_cli("create-organization", "acme", "--owner-email", "boss@acme.test")
    result = orchestrate_cli("create-organization", "acme", "--owner-email", "other@acme.test")
    assert "already exists" in str(result.exception)
