"""``fuzzball cluster list`` against a Federate: members, health and free capacity."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from support.federation_harness import start_federation

from fuzzball_core.cli import cluster_cmd, context_cmd
from fuzzball_core.cli.main import cli
from fuzzball_core.errors import FailedPrecondition

# main.py wires these in; until it does (and harmlessly after), the tests add them.
context_cmd.register(cli.commands["context"])
cluster_cmd.register(cli.commands["cluster"])


def _fuzzball(home, *args):
    return CliRunner().invoke(cli, list(args), env={"XDG_CONFIG_HOME": str(home)})


@pytest.fixture
def logged_in(tmp_path, members):
    federation = start_federation(
        tmp_path, members, extra_clusters=[{"name": "gone", "address": "http://127.0.0.1:9"}]
    )
    home = tmp_path / "home"
    result = _fuzzball(
        home,
        "context",
        "create",
        "fed",
        "--address",
        federation.rest_url,
        "--token",
        federation.token,
    )
    assert result.exit_code == 0, result.output
    try:
        yield home
    finally:
        federation.close()


def test_cluster_list_as_json_shows_each_member_with_health_and_free_capacity(logged_in):
    result = _fuzzball(logged_in, "cluster", "list", "-o", "json")
    assert result.exit_code == 0, result.output
    clusters = {c["name"]: c for c in json.loads(result.output)["clusters"]}
    assert clusters["onprem"]["status"] == "CLUSTER_STATUS_READY"
    assert clusters["onprem"]["freeDevices"] == {"nvidia.com/gpu": 2}
    assert (clusters["aws"]["nodes"], clusters["aws"]["freeCores"]) == (2, 32)
    assert clusters["aws"]["freeMemoryGb"] == 128
    assert clusters["gone"]["status"] == "CLUSTER_STATUS_UNREACHABLE"
    assert "unreachable" in clusters["gone"]["problem"]


def test_cluster_list_as_table_has_a_row_per_member(logged_in):
    result = _fuzzball(logged_in, "cluster", "list")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert [cell.strip() for cell in lines[0].split("|")][:4] == ["NAME", "KIND", "STATUS", "NODES"]
    onprem = next(line for line in lines if line.startswith("onprem"))
    assert [cell.strip() for cell in onprem.split("|")][:7] == [
        "onprem",
        "ORCHESTRATE",
        "READY",
        "1",
        "4",
        "16 GiB",
        "2",
    ]


def test_cluster_list_against_an_orchestrate_says_it_is_not_a_federate(tmp_path, members):
    onprem = members[0]
    home = tmp_path / "home"
    _fuzzball(home, "context", "create", "o", "--address", onprem.rest_url, "--token", onprem.token)
    result = _fuzzball(home, "cluster", "list")
    # the console script turns this error into "Error: ..." and exit code 1
    assert isinstance(result.exception, FailedPrecondition)
    assert "is not a Federate" in result.exception.message
