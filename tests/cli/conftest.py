"""Fixtures: the ``fuzzball`` CLI with its API commands, a live server, a private config home."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from support.live_api import LoopThread, start_servers
from support.sql_stack import SqlStack

from fuzzball_core.cli import context_cmd, node_cmd, workflow_remote_cmd
from fuzzball_core.cli.main import cli


def _ensure_registered() -> None:
    # main.py wires these modules in; until it does (and harmlessly after), tests add them.
    context_cmd.register(cli.commands["context"])
    node_cmd.register(cli.commands["node"])
    workflow_remote_cmd.register(cli.commands["workflow"])


_ensure_registered()


class Fuzzball:
    """Runs ``fuzzball ARGS`` in-process against the live server, with its own config home."""

    def __init__(self, config_home: Path, service: SqlStack, rest_url: str, token: str) -> None:
        self.config_home = config_home
        self.service = service
        self.rest_url = rest_url
        self.token = token

    @property
    def config_file(self) -> Path:
        return self.config_home / "fuzzball" / "config.yaml"

    def __call__(self, *args: str, input: str | None = None) -> Result:
        return CliRunner().invoke(
            cli, list(args), input=input, env={"XDG_CONFIG_HOME": str(self.config_home)}
        )

    @property
    def who(self):
        return self.service.authenticate(self.token)


@pytest.fixture
def fuzzball(tmp_path) -> Iterator[Fuzzball]:
    loop = LoopThread()
    service = SqlStack(loop, tmp_path / "orchestrate.db")
    _, token = service.create_account("alice")
    service.add_node("node-1", 8, 16 * 1024**3)
    servers = loop.run(start_servers(service.service))
    try:
        yield Fuzzball(tmp_path / "config-home", service, servers.rest_url, token)
    finally:
        loop.run(servers.close())
        service.close()
        loop.stop()


@pytest.fixture
def logged_in(fuzzball: Fuzzball) -> Fuzzball:
    """The CLI with an active context pointing at the live server, holding a valid token."""
    result = fuzzball(
        "context", "create", "lab", "--address", fuzzball.rest_url, "--token", fuzzball.token
    )
    assert result.exit_code == 0, result.output
    return fuzzball


@pytest.fixture
def admin(fuzzball: Fuzzball, tmp_path) -> Fuzzball:
    """The CLI of an administrator (own config home and context) against the same server."""
    _, token = fuzzball.service.create_account("admin", admin=True)
    cli_as_admin = Fuzzball(tmp_path / "admin-home", fuzzball.service, fuzzball.rest_url, token)
    result = cli_as_admin(
        "context", "create", "lab", "--address", fuzzball.rest_url, "--token", token
    )
    assert result.exit_code == 0, result.output
    return cli_as_admin
