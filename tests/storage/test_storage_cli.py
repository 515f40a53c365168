"""``fuzzball volume ...`` and ``fuzzball admin storage ...`` against Orchestrate's REST
gateway: what each prints, and the warnings of a class definition on stderr."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result
from support.isolation_stack import IsolationStack

from fuzzball_core.cli.main import cli

Fuzzball = Callable[..., Result]


@pytest.fixture(scope="module")
def stack(tmp_path_factory) -> Iterator[IsolationStack]:
    served = IsolationStack(tmp_path_factory.mktemp("storage-cli"))
    try:
        yield served
    finally:
        served.close()


def signed_in(stack: IsolationStack, home: Path, token: str) -> Fuzzball:
    """``fuzzball ARGS`` in a context holding ``token``."""
    env = {"XDG_CONFIG_HOME": str(home), "HOME": str(home)}

    def run(*args: str) -> Result:
        return CliRunner().invoke(cli, list(args), env=env)

    address = stack.rest_url.removesuffix("/v3")
    created = run("context", "create", "lab", "--address", address, "--token", token)
    assert created.exit_code == 0, created.output
    return run


def test_a_volume_is_created_listed_described_and_deleted_by_reference(stack, tmp_path) -> None:
    fuzzball = signed_in(stack, tmp_path, stack.tenants.acme_owner.token)
    created = fuzzball("volume", "create", "notes", "--description", "lab notes")
    assert created.exit_code == 0, created.output
    assert "Created volume volume://user/persistent/notes" in created.output
    assert "volume://user/persistent/notes" in fuzzball("volume", "list").output
    described = fuzzball("volume", "describe", "volume://user/persistent/notes")
    assert "Description:   lab notes" in described.output, described.output
    deleted = fuzzball("volume", "delete", "volume://user/persistent/notes")
    assert deleted.exit_code == 0, deleted.output
    assert "volume://user/persistent/notes" not in fuzzball("volume", "list").output


def test_a_storage_class_file_is_created_with_its_warnings_on_stderr(stack, tmp_path) -> None:
    fuzzball = signed_in(stack, tmp_path, stack.tenants.admin_token)
    definition = tmp_path / "class.yaml"
    definition.write_text(
        "name: nfs-scratch\ndriver: hostpath\nparameters: {root: /srv/nfs}\n"
        "capacity: {size: '5', unit: GIB}\n"
    )
    created = fuzzball("admin", "storage", "class", "create", str(definition))
    assert created.exit_code == 0, created.output
    assert "warning: class.capacity: the hostpath driver has no quota here" in created.output
    listed = fuzzball("admin", "storage", "class", "list")
    assert "nfs-scratch" in listed.output and "hostpath" in listed.output


def test_a_member_is_refused_the_admin_storage_commands(stack, tmp_path) -> None:
    fuzzball = signed_in(stack, tmp_path, stack.tenants.acme_member.token)
    refused = fuzzball("admin", "storage", "driver", "list")
    assert refused.exit_code != 0
    # the console script prints it as "error: ..." (fuzzball_core.console)
    assert "needs the administer_cluster permission" in str(refused.exception)


def test_a_volumes_list_and_its_describe_show_status_and_size_alike(stack, tmp_path) -> None:
    fuzzball = signed_in(stack, tmp_path, stack.tenants.acme_owner.token)
    assert fuzzball("volume", "create", "alike").exit_code == 0
    try:
        (row,) = [
            line for line in fuzzball("volume", "list").output.splitlines() if "alike" in line
        ]
        described = fuzzball("volume", "describe", "volume://user/persistent/alike").output
        assert " ENABLED " in f" {row} " and "Status:        ENABLED" in described, described
        assert " 0 B " in f" {row} " and "Size:          0 B" in described, described
    finally:
        fuzzball("volume", "delete", "volume://user/persistent/alike")


def test_a_volume_is_described_and_deleted_by_the_name_its_list_shows(stack, tmp_path) -> None:
    fuzzball = signed_in(stack, tmp_path, stack.tenants.acme_owner.token)
    assert fuzzball("volume", "create", "v1", "--description", "by name").exit_code == 0
    described = fuzzball("volume", "describe", "v1")
    assert described.exit_code == 0, described.output
    assert "Reference:     volume://user/persistent/v1" in described.output
    deleted = fuzzball("volume", "delete", "v1")
    assert deleted.exit_code == 0, deleted.output
    assert "Deleted volume volume://user/persistent/v1" in deleted.output


def test_a_name_finds_the_users_volume_before_the_groups(stack, tmp_path) -> None:
    fuzzball = signed_in(stack, tmp_path, stack.tenants.acme_owner.token)
    assert fuzzball("volume", "create", "both", "--scope", "group").exit_code == 0
    try:
        group = fuzzball("volume", "describe", "both")
        assert "Reference:     volume://group/persistent/both" in group.output, group.output
        assert fuzzball("volume", "create", "both").exit_code == 0
        user = fuzzball("volume", "describe", "both")
        assert "Reference:     volume://user/persistent/both" in user.output, user.output
    finally:
        fuzzball("volume", "delete", "volume://user/persistent/both")
        fuzzball("volume", "delete", "volume://group/persistent/both")


def test_a_name_no_volume_has_says_what_to_give(stack, tmp_path) -> None:
    fuzzball = signed_in(stack, tmp_path, stack.tenants.acme_owner.token)
    missing = fuzzball("volume", "describe", "nosuch")
    assert missing.exit_code == 1
    assert "volume 'nosuch' not found: give a volume's id, name or reference" in str(
        missing.exception
    )


def test_a_storage_class_is_described_as_yaml_or_json_and_no_table_is_offered(
    stack, tmp_path
) -> None:
    fuzzball = signed_in(stack, tmp_path, stack.tenants.admin_token)
    as_yaml = fuzzball("admin", "storage", "class", "describe", "persistent")
    as_json = fuzzball("admin", "storage", "class", "describe", "persistent", "-o", "json")
    assert as_yaml.exit_code == 0, as_yaml.output
    assert yaml.safe_load(as_yaml.output) == json.loads(as_json.output)
    table = fuzzball("admin", "storage", "class", "describe", "persistent", "-o", "table")
    assert table.exit_code == 2
    assert "'table' is not one of 'yaml', 'json'" in table.output
