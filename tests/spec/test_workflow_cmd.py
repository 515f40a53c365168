"""``fuzzball workflow validate`` and ``fuzzball workflow upgrade``, offline."""

from __future__ import annotations

import os
from pathlib import Path

import click
import pytest
import yaml
from click.testing import CliRunner
from support.example_files import EXAMPLE_FILES, EXAMPLES_DIR

from fuzzball_core.cli.workflow_cmd import EXTRA_VALIDATORS_KEY, workflow

GOOD = "version: v4\njobs:\n  a: {image: {uri: docker://alpine}}\n"
BAD = (
    "version: v4\njobs:\n  a:\n    image: {uri: 'alpine', secret: hunter2}\n"
    "    depends-on: [{name: missing}]\n    resource: {cpu: {cores: none}}\n"
)


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_validate_prints_valid_for_every_example(runner: CliRunner) -> None:
    result = runner.invoke(workflow, ["validate", *map(str, EXAMPLE_FILES)])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [f"{p}: valid" for p in EXAMPLE_FILES]


def test_validate_reports_every_error_with_its_path_and_exits_1(
    runner: CliRunner, tmp_path: Path
) -> None:
    result = runner.invoke(workflow, ["validate", write(tmp_path, "bad.yaml", BAD)])
    assert result.exit_code == 1
    assert "jobs.a.image.uri:" in result.stderr
    assert "jobs.a.resource.cpu.cores:" in result.stderr
    assert "jobs.a.depends-on[0].name: no job or service is named missing" in result.stderr
    assert "hunter2" not in result.output
    assert "Traceback" not in result.output


def test_validate_refuses_what_only_the_plan_refuses(runner: CliRunner, tmp_path: Path) -> None:
    clash = (
        "version: v4\njobs:\n  j: {image: {uri: 'docker://a'}, command: [x], mounts: {/a: a}}\n"
        "volumes:\n  a.egress: {reference: volume://user/ephemeral}\n"
        "  a:\n    reference: volume://user/ephemeral\n"
        "    egress: [{source: {uri: 'file://x'}, destination: {uri: 's3://b/k'}}]\n"
    )
    result = runner.invoke(workflow, ["validate", write(tmp_path, "clash.yaml", clash)])
    assert result.exit_code == 1
    assert "volumes.a.egress: the volume a.egress takes the name" in result.stderr


def test_validate_checks_every_file_even_after_a_bad_one(runner: CliRunner, tmp_path: Path) -> None:
    bad, good = write(tmp_path, "bad.yaml", BAD), write(tmp_path, "good.yaml", GOOD)
    result = runner.invoke(workflow, ["validate", bad, good])
    assert result.exit_code == 1
    assert f"{good}: valid" in result.stdout


def test_validate_prints_warnings_without_failing(runner: CliRunner, tmp_path: Path) -> None:
    path = write(
        tmp_path, "w.yaml", GOOD + "services:\n  s: {image: {uri: docker://x}, policy: {}}\n"
    )
    result = runner.invoke(workflow, ["validate", path])
    assert result.exit_code == 0
    assert f"{path}: warning: services.s.policy:" in result.stderr
    assert f"{path}: valid" in result.stdout


@pytest.mark.parametrize("kind", ["missing", "directory", "unreadable", "binary", "empty"])
def test_validate_reports_unusable_files_without_a_traceback(
    runner: CliRunner, tmp_path: Path, kind: str
) -> None:
    path = tmp_path / "f.yaml"
    if kind == "directory":
        path.mkdir()
    elif kind == "unreadable":
        path.write_text(GOOD)
        path.chmod(0)
    elif kind == "binary":
        path.write_bytes(os.urandom(4096))
    elif kind == "empty":
        path.write_bytes(b"")
    result = runner.invoke(workflow, ["validate", str(path)])
    if kind == "unreadable" and result.exit_code == 0:
        assert os.geteuid() == 0  # root reads mode-0 files; nothing else to check
        return
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert str(path) in result.stderr


def test_validate_runs_plugin_validators_from_the_context(
    runner: CliRunner, tmp_path: Path
) -> None:
    def no_alpine(model: object) -> list[tuple[str, str]]:
        return [("jobs.a.image.uri", "alpine is not allowed here")]

    @click.group()
    @click.pass_context
    def root(ctx: click.Context) -> None:  # stands in for the root CLI wiring the plugin hook
        ctx.meta[EXTRA_VALIDATORS_KEY] = [no_alpine]

    root.add_command(workflow)
    result = runner.invoke(root, ["workflow", "validate", write(tmp_path, "good.yaml", GOOD)])
    assert result.exit_code == 1
    assert "jobs.a.image.uri: alpine is not allowed here" in result.stderr


def test_upgrade_prints_v4_yaml_of_a_v1_file(runner: CliRunner) -> None:
    result = runner.invoke(workflow, ["upgrade", str(EXAMPLES_DIR / "blast.yaml")])
    assert result.exit_code == 0, result.output
    document = yaml.safe_load(result.stdout)
    assert document["version"] == "v4"
    assert document["jobs"]["run-blast"]["depends-on"] == [
        {"name": "make-blast-database", "status": "FINISHED"}
    ]
    assert document["jobs"]["run-blast"]["mounts"] == {"/data": {"volume": "blast-volume"}}


def test_upgrade_of_an_invalid_file_exits_1_with_its_errors(
    runner: CliRunner, tmp_path: Path
) -> None:
    result = runner.invoke(workflow, ["upgrade", write(tmp_path, "bad.yaml", BAD)])
    assert result.exit_code == 1
    assert "jobs.a.image.uri" in result.stderr
    assert result.stdout == ""


def test_upgrade_of_a_missing_file_is_an_error_message(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(workflow, ["upgrade", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 1
    assert "no such file" in result.stderr


def test_validate_refuses_an_image_reference_its_backend_refuses_naming_the_field(
    runner: CliRunner, tmp_path: Path
) -> None:
    from fuzzball_core.cli.main import cli

    job = "version: v1\njobs:\n  a:\n    image: {{uri: '{uri}'}}\n    command: [echo, hi]\n"
    bad = write(tmp_path, "bad.yaml", job.format(uri="docker://Alpine:latest"))
    good = write(tmp_path, "good.yaml", job.format(uri="docker://alpine:latest"))

    result = runner.invoke(cli, ["workflow", "validate", bad, good])

    assert result.exit_code == 1
    assert "jobs.a.image.uri: 'library/Alpine' in 'docker://Alpine:latest'" in result.output
    assert f"{good}: valid" in result.output
