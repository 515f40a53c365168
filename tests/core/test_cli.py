"""The CLI frame: nouns, --help everywhere, output formats, errors without tracebacks."""

import json
import os
import subprocess
import sys

import pytest
import yaml
from click.testing import CliRunner

from fuzzball_core import __version__
from fuzzball_core.cli.main import cli
from fuzzball_core.cli.output import format_table

NOUNS = ["context", "workflow", "node", "cluster", "endpoint", "plugin", "local", "version"]


def invoke(*args: str, **kwargs):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False, **kwargs)


def test_root_help_lists_the_real_cli_nouns():
    result = invoke("--help")
    for noun in NOUNS:
        assert f"\n  {noun} " in result.output


@pytest.mark.parametrize("noun", NOUNS)
def test_every_noun_has_help(noun):
    result = invoke(noun, "--help")
    assert result.exit_code == 0
    assert "Usage: cli " + noun in result.output or "Usage: " in result.output


def test_every_command_has_help():
    def walk(group, path):
        for name, command in getattr(group, "commands", {}).items():
            yield [*path, name], command
            yield from walk(command, [*path, name])

    for path, _ in walk(cli, []):
        assert invoke(*path, "--help").exit_code == 0, path


def test_version_as_json():
    assert json.loads(invoke("version", "-o", "json").output)["version"] == __version__


def test_version_as_yaml():
    assert yaml.safe_load(invoke("version", "-o", "yaml").output)["version"] == __version__


def test_version_as_table_has_upper_case_headers():
    lines = invoke("version").output.splitlines()
    assert lines[0].startswith("CLIENT VERSION | PYTHON")
    assert lines[1].startswith(__version__)


def test_unknown_output_format_is_refused():
    result = CliRunner().invoke(cli, ["version", "-o", "xml"])
    assert result.exit_code == 2
    assert "'xml' is not one of 'table', 'json', 'yaml'" in result.output


def test_plugin_list_groups_drivers_by_kind():
    data = json.loads(invoke("plugin", "list", "-o", "json").output)
    assert set(data["drivers"]) == {
        "scheduler",
        "provisioner",
        "image_backend",
        "router",
        "storage_driver",
    }
    assert all(h["distribution"] for h in data["hooks"])


def test_table_pads_columns():
    assert format_table(["a", "bb"], [["xxx", 1]]).splitlines() == ["A   | BB", "xxx | 1"]


def test_bad_config_key_exits_2_naming_the_key(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("scheduler:\n  drivr: default\n")
    result = subprocess.run(
        [sys.executable, "-m", "fuzzball_core.cli", "--config", str(config), "plugin", "list"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert "scheduler.drivr: unknown key" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_missing_config_file_is_refused_naming_it_even_where_none_is_read(tmp_path):
    missing = tmp_path / "nonexist.yaml"
    result = subprocess.run(
        [sys.executable, "-m", "fuzzball_core.cli", "--config", str(missing), "context", "list"],
        capture_output=True,
        text=True,
        env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "home")},
    )
    assert result.returncode == 2
    assert f"'{missing}' does not exist" in result.stderr
    assert "Traceback" not in result.stderr


def test_federate_help_lists_its_commands():
    result = subprocess.run(["fuzzball-federate", "--help"], capture_output=True, text=True)
    assert result.returncode == 0
    assert "serve" in result.stdout and "create-account" in result.stdout


def test_federate_without_its_router_refuses_to_start_with_exit_2(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(f"data-dir: {tmp_path}\nfederate:\n  router: nosuchrouter\n")
    result = subprocess.run(
        ["fuzzball-federate", "--config", str(config), "serve"], capture_output=True, text=True
    )
    assert result.returncode == 2
    assert "no router plugin named 'nosuchrouter'" in result.stderr
    assert "Traceback" not in result.stderr
