"""``fuzzball secret create|list|describe|update|delete`` against the real service through
the live REST gateway: values from --value, a file or stdin, never printed back."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from support.secret_stack import Person, SecretStack, secret_stack

from fuzzball_core.cli.main import cli
from fuzzball_core.errors import InvalidArgument, NotFound, PermissionDenied
from fuzzball_core.service.secrets import Secrets

VALUE = "cli-secret-value-Q9w"
Fuzzball = Callable[..., Result]


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[SecretStack]:
    with secret_stack(tmp_path / "server") as running:
        yield running


@pytest.fixture
def alice(stack: SecretStack) -> Person:
    return stack.tenant("acme", "alice@acme.example")


@pytest.fixture
def fuzzball(stack: SecretStack, alice: Person, tmp_path: Path) -> Fuzzball:
    """``fuzzball ARGS`` with a context holding alice's token."""
    env = {"XDG_CONFIG_HOME": str(tmp_path / "home")}

    def run(*args: str, input: str | None = None) -> Result:
        return CliRunner().invoke(cli, list(args), input=input, env=env)

    created = run("context", "create", "lab", "--address", stack.url, "--token", alice.token)
    assert created.exit_code == 0, created.output
    return run


def _resolve(stack: SecretStack, person: Person, reference: str) -> str:
    owner = Secrets.owner_of(stack.service.identity.login_principal(person.user_id))
    return stack.secrets.resolve(owner, reference)


def _only_id(fuzzball: Fuzzball) -> str:
    listed = fuzzball("secret", "list", "-o", "json")
    return json.loads(listed.output)[0]["id"]


def test_a_value_from_stdin_is_stored_and_never_printed(fuzzball, stack, alice):
    created = fuzzball("secret", "create", "db", input=VALUE + "\n")
    listed = fuzzball("secret", "list")

    assert created.exit_code == 0, created.output
    assert "Created secret db" in created.output
    assert "secret://user/db" in listed.output
    assert VALUE not in created.output + listed.output
    assert _resolve(stack, alice, "secret://user/db") == VALUE


def test_a_value_from_a_file_and_from_the_option(fuzzball, stack, alice, tmp_path):
    source = tmp_path / "value.txt"
    source.write_text("from-a-file")
    assert fuzzball("secret", "create", "a", "--from-file", str(source)).exit_code == 0
    assert fuzzball("secret", "create", "b", "--scope", "group", "--value", "inline").exit_code == 0

    assert _resolve(stack, alice, "secret://user/a") == "from-a-file"
    assert _resolve(stack, alice, "secret://group/b") == "inline"


def test_structured_secrets_read_their_fields_as_yaml(fuzzball, stack, alice):
    fields = "username: robot\npassword: " + VALUE + "\ntrustedDomains: [r.example]\n"
    created = fuzzball("secret", "create", "reg", "--type", "image", input=fields)
    described = fuzzball("secret", "describe", _only_id(fuzzball), "-o", "json")

    assert created.exit_code == 0, created.output
    assert json.loads(described.output)["image"] == {
        "username": "robot",
        "trustedDomains": ["r.example"],
    }
    assert VALUE not in described.output


def test_update_replaces_the_value_and_delete_removes_it(fuzzball, stack, alice):
    fuzzball("secret", "create", "db", "--value", "old")
    secret_id = _only_id(fuzzball)

    updated = fuzzball("secret", "update", secret_id, input="new\n")
    resolved = _resolve(stack, alice, "secret://user/db")
    deleted = fuzzball("secret", "delete", secret_id)

    assert updated.exit_code == 0, updated.output
    assert resolved == "new"
    assert deleted.exit_code == 0, deleted.output
    assert json.loads(fuzzball("secret", "list", "-o", "json").output) == []


def test_a_refusal_names_the_permission_and_never_the_value(fuzzball):
    result = fuzzball("secret", "create", "site", "--scope", "cluster", "--value", VALUE)

    assert isinstance(result.exception, PermissionDenied)
    assert "administer_cluster" in str(result.exception)
    assert VALUE not in str(result.exception) + result.output


def test_an_id_naming_another_route_reaches_no_other_kind_of_object(fuzzball):
    # as typed, ``/endpoints/../secrets/ID`` would be ``/secrets/ID``: the secret's delete
    fuzzball("secret", "create", "kept", "--value", VALUE)
    secret_id = _only_id(fuzzball)

    result = fuzzball("endpoint", "delete", f"../secrets/{secret_id}")

    assert isinstance(result.exception, NotFound), result.output
    assert "Deleted" not in result.output
    assert [s["id"] for s in json.loads(fuzzball("secret", "list", "-o", "json").output)] == [
        secret_id
    ]


@pytest.mark.parametrize("typed", [".", ".."])
def test_a_dot_segment_for_an_id_is_refused_naming_it(fuzzball, typed):
    result = fuzzball("secret", "delete", typed)
    assert isinstance(result.exception, InvalidArgument)
    assert f"secret '{typed}' is not valid" in str(result.exception)


def test_describe_update_and_delete_take_the_name_a_listing_shows(fuzzball, stack, alice):
    fuzzball("secret", "create", "named", "--value", "old")

    described = fuzzball("secret", "describe", "named", "-o", "json")
    updated = fuzzball("secret", "update", "named", input="new\n")
    resolved = _resolve(stack, alice, "secret://user/named")
    deleted = fuzzball("secret", "delete", "named")

    assert described.exit_code == 0, described.output
    assert json.loads(described.output)["name"] == "named"
    assert updated.exit_code == 0 and resolved == "new"
    assert deleted.exit_code == 0, deleted.output
    assert json.loads(fuzzball("secret", "list", "-o", "json").output) == []


def test_a_secret_neither_id_nor_name_finds_is_not_found_naming_both(fuzzball):
    result = fuzzball("secret", "describe", "nothing-here")
    assert isinstance(result.exception, NotFound)
    assert "no user secret has the ID or name 'nothing-here'" in str(result.exception)


@pytest.mark.parametrize("command", ["create", "update"])
def test_value_and_from_file_together_are_refused_and_nothing_changes(
    fuzzball, stack, alice, tmp_path, command
):
    assert fuzzball("secret", "create", "s7", "--value", "first").exit_code == 0
    source = tmp_path / "value.txt"
    source.write_text("FILEVALUE\n")
    name = "s8" if command == "create" else "s7"

    both = fuzzball("secret", command, name, "--value", "ARG", "--from-file", str(source))

    assert both.exit_code == 2
    assert "--value and --from-file are mutually exclusive" in both.output
    assert _resolve(stack, alice, "secret://user/s7") == "first"
    assert "s8" not in fuzzball("secret", "list").output
