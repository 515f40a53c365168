"""``fuzzball cluster list`` against a Federate: members, health and free capacity."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from support.federation_harness import GIB, start_federation, start_member

from fuzzball_core.cli import cluster_cmd, context_cmd
from fuzzball_core.cli.main import cli
from fuzzball_core.errors import FailedPrecondition
from fuzzball_federation.members import configured_id

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


def test_cluster_list_as_table_is_id_name_kind_status_as_in_the_article(logged_in):
    result = _fuzzball(logged_in, "cluster", "list")
    assert result.exit_code == 0, result.output
    rows = [[cell.strip() for cell in line.split("|")] for line in result.output.splitlines()]
    assert rows[0] == ["ID", "NAME", "KIND", "STATUS"]
    by_name = {row[1]: row for row in rows[1:] if len(row) == 4}
    assert by_name["onprem"] == [
        configured_id("onprem"),
        "onprem",
        "CLUSTER_KIND_ORCHESTRATE",
        "CLUSTER_STATUS_READY",
    ]
    assert by_name["federate"][2:] == ["CLUSTER_KIND_FEDERATE", "CLUSTER_STATUS_READY"]
    assert by_name["gone"][3].startswith("CLUSTER_STATUS_UNREACHABLE (")


def test_cluster_show_prints_the_one_cluster(logged_in):
    result = _fuzzball(logged_in, "cluster", "show", configured_id("aws"), "-o", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["name"] == "aws"


def test_cluster_join_from_a_member_context_then_leave(tmp_path, members):
    late = start_member(tmp_path, "late", [{"name": "n", "cores": 2, "memory": 4 * GIB}])
    _, admin = late.stack.create_account("root", kind="admin")
    federation = start_federation(tmp_path, members, admin=True)
    home = tmp_path / "home"
    try:
        _fuzzball(home, "context", "create", "m", "--address", late.rest_url, "--token", admin)
        _fuzzball(
            home,
            "context",
            "create",
            "f",
            "--address",
            federation.rest_url,
            "--token",
            federation.token,
        )
        _fuzzball(home, "context", "use", "f")
        joined = _fuzzball(home, "cluster", "join", "--from-context", "m")
        assert joined.exit_code == 0, joined.output
        listed = json.loads(_fuzzball(home, "cluster", "list", "-o", "json").output)
        cluster_id = next(c["id"] for c in listed["clusters"] if c["name"] == "late")
        left = _fuzzball(home, "cluster", "leave", cluster_id)
        assert left.exit_code == 0, left.output
        listed = json.loads(_fuzzball(home, "cluster", "list", "-o", "json").output)
        assert "late" not in {c["name"] for c in listed["clusters"]}
    finally:
        federation.close()
        late.close()


def test_cluster_list_against_an_orchestrate_says_it_is_not_a_federate(tmp_path, members):
    onprem = members[0]
    home = tmp_path / "home"
    _fuzzball(home, "context", "create", "o", "--address", onprem.rest_url, "--token", onprem.token)
    result = _fuzzball(home, "cluster", "list")
    # the console script turns this error into "Error: ..." and exit code 1
    assert isinstance(result.exception, FailedPrecondition)
    assert "is not a Federate" in result.exception.message


def test_cluster_show_against_an_orchestrate_says_it_is_not_a_federate(tmp_path, members):
    onprem = members[0]
    home = tmp_path / "home"
    _fuzzball(home, "context", "create", "o", "--address", onprem.rest_url, "--token", onprem.token)
    result = _fuzzball(home, "cluster", "show", "nosuch")
    assert isinstance(result.exception, FailedPrecondition)
    assert "is not a Federate" in result.exception.message


def test_cluster_join_takes_the_file_registration_config_printed(tmp_path, members):
    late = start_member(tmp_path, "late", [{"name": "n", "cores": 2, "memory": 4 * GIB}])
    _, admin = late.stack.create_account("root", kind="admin")
    federation = start_federation(tmp_path, members, admin=True)
    home = tmp_path / "home"
    try:
        _fuzzball(home, "context", "create", "m", "--address", late.rest_url, "--token", admin)
        printed = _fuzzball(home, "cluster", "registration-config")
        assert printed.exit_code == 0, printed.output
        registration = tmp_path / "late.json"
        registration.write_text(printed.output)
        _fuzzball(
            home,
            "context",
            "create",
            "f",
            "--address",
            federation.rest_url,
            "--token",
            federation.token,
        )
        _fuzzball(home, "context", "use", "f")
        joined = _fuzzball(home, "cluster", "join", str(registration))
        assert joined.exit_code == 0, joined.output
        assert json.loads(printed.output)["id"] in joined.output
    finally:
        federation.close()
        late.close()


def test_cluster_join_without_file_or_context_is_refused(logged_in):
    result = _fuzzball(logged_in, "cluster", "join")
    assert "either FILE or --from-context" in result.exception.message
