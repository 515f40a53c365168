"""``fuzzball admin config get|set|history`` (cli/central_config_cmd.py) against Orchestrate's
REST gateway: a document set from a file is the next revision and in force, ``get`` prints
it as stored or as JSON, ``history`` lists the revisions, and a refusal names what is wrong."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result
from support.cluster import InProcessOrchestrate, free_port

from fuzzball_core.cli.main import cli
from fuzzball_core.errors import InvalidArgument, PermissionDenied

DOCUMENT = """\
# nodes for the night shift
provisioner:
  definitions:
    - id: night
      driver: onprem
      cores: 8
      memory: 16GiB
      config:
        state-dir: {state}
        inventory:
          - {{host: night-1, power-on: "true", power-off: "true"}}
"""


class Served:
    """Orchestrate with no provisioner definition in its file, and a CLI context for an
    administrator (or a user)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        rest = f"127.0.0.1:{free_port()}"
        self.orchestrate = InProcessOrchestrate(
            {
                "data-dir": str(directory / "data"),
                "database": {"url": f"sqlite:///{directory / 'orchestrate.db'}"},
                "orchestrate": {
                    "grpc-listen": f"127.0.0.1:{free_port()}",
                    "rest-listen": rest,
                    "node-token": "config-cli-node-token",
                },
                "tls": {"plaintext": True},
            }
        )
        self.address = f"http://{rest}"
        service = self.orchestrate.service
        self.admin = self.orchestrate.call(lambda: service.create_account("ops", admin=True))[1]
        self.user = self.orchestrate.call(lambda: service.create_account("someone"))[1]

    def fuzzball(self, *args: str, token: str = "", stdin: str | None = None) -> Result:
        """``fuzzball ARGS`` in a context of its own for ``token`` (the admin's by default)."""
        token = token or self.admin
        home = self.directory / f"home-{'admin' if token == self.admin else 'user'}"
        env = {"XDG_CONFIG_HOME": str(home)}
        runner = CliRunner()
        if not (home / "fuzzball").exists():
            created = runner.invoke(
                cli,
                ["context", "create", "t", "--address", self.address, "--token", token],
                env=env,
            )
            assert created.exit_code == 0, created.output
        return runner.invoke(cli, list(args), env=env, input=stdin)

    def ok(self, *args: str, stdin: str | None = None) -> str:
        result = self.fuzzball(*args, stdin=stdin)
        assert result.exit_code == 0, (args, result.output, result.exception)
        return result.output

    def document_file(self, text: str | None = None) -> Path:
        path = self.directory / "central.yaml"
        path.write_text(text or DOCUMENT.format(state=self.directory / "onprem"))
        return path


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    running = Served(tmp_path)
    try:
        yield running
    finally:
        running.orchestrate.close()


def test_set_makes_the_file_the_first_revision(served):
    output = served.ok("admin", "config", "set", str(served.document_file()))
    assert "revision 1" in output


def test_a_set_definition_is_in_force_at_once(served):
    served.ok("admin", "config", "set", str(served.document_file()))
    listed = served.ok("admin", "provisioner", "definition", "list")
    assert "night" in listed


def test_set_reads_standard_input_for_a_dash(served):
    text = served.document_file().read_text()
    served.ok("admin", "config", "set", "-", stdin=text)
    assert "night" in served.ok("admin", "config", "get")


def test_get_prints_the_document_as_stored(served):
    path = served.document_file()
    served.ok("admin", "config", "set", str(path))
    assert served.ok("admin", "config", "get") == path.read_text()


def test_get_json_prints_the_documents_content(served):
    path = served.document_file()
    served.ok("admin", "config", "set", str(path))
    shown = json.loads(served.ok("admin", "config", "get", "-o", "json"))
    assert shown == yaml.safe_load(path.read_text())


def test_get_an_earlier_revision(served):
    first = served.document_file()
    served.ok("admin", "config", "set", str(first))
    first_text = first.read_text()
    served.ok(
        "admin", "config", "set", str(served.document_file("provisioner: {definitions: []}\n"))
    )
    assert served.ok("admin", "config", "get", "--revision", "1") == first_text
    assert "definitions: []" in served.ok("admin", "config", "get")


def test_get_before_any_revision_prints_an_empty_document_and_says_so_on_stderr(served):
    result = served.fuzzball("admin", "config", "get")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == ""
    assert "no central configuration is stored yet" in result.stderr


def test_history_lists_every_revision(served):
    served.ok("admin", "config", "set", str(served.document_file()))
    served.ok("admin", "config", "set", str(served.document_file()))
    table = served.ok("admin", "config", "history").splitlines()
    assert table[0].split() == ["REVISION", "|", "CREATED"]
    assert [line.split()[0] for line in table[1:]] == ["1", "2"]


def test_history_as_yaml(served):
    served.ok("admin", "config", "set", str(served.document_file()))
    listed = yaml.safe_load(served.ok("admin", "config", "history", "-o", "yaml"))
    assert [entry["revision"] for entry in listed] == ["1"]


def test_a_section_the_server_does_not_hold_is_refused_naming_it(served):
    path = served.document_file("orchestrate: {rest-listen: 0.0.0.0:1}\n")
    result = served.fuzzball("admin", "config", "set", str(path))
    assert isinstance(result.exception, InvalidArgument)
    assert "config: orchestrate: not held by the central configuration" in str(result.exception)


def test_a_file_that_is_not_yaml_is_refused_before_sending(served):
    path = served.document_file("provisioner: [unclosed\n")
    result = served.fuzzball("admin", "config", "set", str(path))
    assert result.exit_code != 0
    assert "not a YAML document" in result.output
    assert served.ok("admin", "config", "history").splitlines()[1:] == []


def test_a_user_may_not_set_the_central_configuration(served):
    path = served.document_file()
    result = served.fuzzball("admin", "config", "set", str(path), token=served.user)
    assert isinstance(result.exception, PermissionDenied)
    assert "night" not in served.ok("admin", "provisioner", "definition", "list")
