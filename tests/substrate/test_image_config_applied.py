"""How a node applies an image's config to a job: Env under the job's env, Entrypoint and
Cmd around the job's command (as ``docker run IMAGE ARGS``), WorkingDir unless the job sets
cwd, and User resolved in the image, whose passwd entry names HOME (root's too) unless the
environment sets it; an image without a kept config runs with none."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
from support.config_images import push_config_image

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.drivers import ImageConfig, image_config_path
from fuzzball_core.spec.models import Job
from fuzzball_core.substrate.drivers import NodeServices, RunOutcome, RunRequest, driver_for
from fuzzball_core.substrate.drivers.steps import job_command, job_cwd, job_environment
from fuzzball_runtime.spec import DEFAULT_PATH

IMAGE = ImageConfig(
    env=("PATH=/opt/bin:/bin", "GREETING=image", "ONLY_IMAGE=yes"),
    entrypoint=("/bin/entry", "--flag"),
    cmd=("default-arg",),
    working_dir="/srv/app",
)


def _job(**fields: Any) -> Job:
    return Job.model_validate({"image": {"uri": "docker://cfg/any:1"}, **fields})


def _request(job: dict[str, Any]) -> RunRequest:
    return RunRequest.from_assignment(
        node_pb2.Assignment(
            run_id=11,
            workflow_id="8d0c7f52-0b8e-4a3c-9d61-3f2b1e0a9c47",
            stage_name="jobs.cfg",
            job_json=json.dumps({"image": {"uri": "docker://cfg/any:1"}, **job}),
        )
    )


# -- command ------------------------------------------------------------------------------------


def test_without_command_args_or_script_the_entrypoint_and_cmd_run() -> None:
    assert job_command(_job(), None, IMAGE) == ["/bin/entry", "--flag", "default-arg"]


def test_a_command_replaces_the_cmd_and_follows_the_entrypoint() -> None:
    job = _job(command=["mine", "1"], args=["x"])

    assert job_command(job, None, IMAGE) == ["/bin/entry", "--flag", "mine", "1", "x"]


def test_a_script_runs_without_the_entrypoint_or_cmd() -> None:
    job = _job(script="echo hi", args=["x"])

    assert job_command(job, "/.fuzzball/script", IMAGE) == ["/bin/sh", "/.fuzzball/script", "x"]


def test_a_script_naming_its_interpreter_is_run_itself() -> None:
    job = _job(script="#!/usr/bin/env python3\nprint('hi')\n", args=["x"])

    assert job_command(job, "/.fuzzball/script", IMAGE) == ["/.fuzzball/script", "x"]


def test_a_command_replaces_a_cmd_without_entrypoint() -> None:
    image = ImageConfig(cmd=("/bin/sh",))

    assert job_command(_job(command=["/bin/echo", "hi"]), None, image) == ["/bin/echo", "hi"]


def test_an_entrypoint_alone_runs_when_the_job_names_no_command() -> None:
    image = ImageConfig(entrypoint=("/bin/serve",))

    assert job_command(_job(), None, image) == ["/bin/serve"]


def test_args_alone_replace_the_cmd_as_a_command_would() -> None:
    assert job_command(_job(args=["x"]), None, IMAGE) == ["/bin/entry", "--flag", "x"]


def test_nothing_anywhere_names_no_command() -> None:
    assert job_command(_job(env=["A=1"]), None, ImageConfig(env=("B=2",))) == []


# -- environment and working directory ------------------------------------------------------------


def test_the_image_env_is_under_the_jobs_env() -> None:
    env = job_environment(_request({"command": ["true"], "env": ["GREETING=job"]}), "cfg", IMAGE)

    assert (env["PATH"], env["GREETING"], env["ONLY_IMAGE"]) == ("/opt/bin:/bin", "job", "yes")


def test_the_default_path_stays_when_the_image_sets_none() -> None:
    env = job_environment(_request({"command": ["true"]}), "cfg", ImageConfig(env=("A=1",)))

    assert env["PATH"].startswith("/usr/local/sbin:") and env["A"] == "1"


def test_the_working_dir_applies_unless_the_job_sets_cwd() -> None:
    assert job_cwd(_job(), IMAGE) == "/srv/app"
    assert job_cwd(_job(cwd="/tmp"), IMAGE) == "/tmp"


def test_a_relative_working_dir_is_taken_from_the_root() -> None:
    assert job_cwd(_job(), ImageConfig(working_dir="srv")) == "/srv"


# -- through the driver and the runtime ----------------------------------------------------------


def _run(node: NodeServices, uri: str, job: dict[str, Any]) -> tuple[RunOutcome, str]:
    request = RunRequest.from_assignment(
        node_pb2.Assignment(
            run_id=12,
            workflow_id="8d0c7f52-0b8e-4a3c-9d61-3f2b1e0a9c47",
            stage_name="jobs.cfg",
            job_json=json.dumps({"image": {"uri": uri}, **job}),
        )
    )
    output: list[bytes] = []

    async def scenario() -> RunOutcome:
        execution = driver_for(request, node, lambda _run, s, d: output.append(d))
        try:
            return (await execution.start()) or (await execution.wait())
        finally:
            execution.destroy()

    outcome = asyncio.run(scenario())
    return outcome, b"".join(output).decode()


@pytest.mark.root
def test_the_job_runs_as_the_images_user_with_its_groups_and_home(
    node: NodeServices, local_registry: Any
) -> None:
    uri = push_config_image(local_registry.url, "driver-user", {"User": "app"})

    outcome, output = _run(
        node, uri, {"command": ["/bin/sh", "-c", "id -u; id -g; id -G; echo $HOME"]}
    )

    assert outcome.exit_code == 0, outcome.message
    assert output.split("\n")[:4] == ["1000", "1000", "1000 29 50", "/home/app"]


@pytest.mark.root
def test_a_job_of_an_image_naming_no_user_gets_roots_home(
    node: NodeServices, local_registry: Any
) -> None:
    uri = push_config_image(local_registry.url, "driver-root", {})

    outcome, output = _run(node, uri, {"command": ["/bin/sh", "-c", "id -u; echo $HOME"]})

    assert outcome.exit_code == 0, outcome.message
    assert output == "0\n/root\n"


@pytest.mark.root
def test_home_the_image_env_sets_wins_over_the_users_passwd_entry(
    node: NodeServices, local_registry: Any
) -> None:
    uri = push_config_image(
        local_registry.url, "driver-home", {"User": "app", "Env": ["HOME=/data"]}
    )

    outcome, output = _run(node, uri, {"command": ["/bin/sh", "-c", "echo $HOME"]})

    assert outcome.exit_code == 0, outcome.message
    assert output == "/data\n"


@pytest.mark.root
def test_a_user_the_image_does_not_know_fails_the_run_naming_it(
    node: NodeServices, local_registry: Any
) -> None:
    uri = push_config_image(local_registry.url, "driver-ghost", {"User": "ghost"})

    outcome, _ = _run(node, uri, {"command": ["/bin/true"]})

    assert outcome.exit_code == -1
    assert "image user 'ghost': no such user in the image's /etc/passwd" in outcome.message


@pytest.mark.root
def test_an_image_without_a_kept_config_runs_with_none_and_says_so(
    node: NodeServices, local_registry: Any, caplog: pytest.LogCaptureFixture
) -> None:
    uri = push_config_image(
        local_registry.url, "driver-old", {"User": "app", "Env": ["GREETING=image"]}
    )
    erofs = node.images.ensure(uri)
    image_config_path(erofs).unlink()  # as an image converted before configs were kept

    with caplog.at_level(logging.INFO, logger="fuzzball.substrate"):
        outcome, output = _run(
            node, uri, {"command": ["/bin/sh", "-c", "id -u; echo ${GREETING-}"]}
        )

    assert outcome.exit_code == 0, outcome.message
    assert output == "0\n\n"
    assert "has no config kept beside it; it runs with an empty config" in caplog.text


def _build(node: NodeServices, uri: str, post: str) -> tuple[RunOutcome, str]:
    """Build on ``uri`` with ``post`` (no object cache to store it in: only its output)."""
    payload = {
        "kind": "image-build",
        "name": "tools",
        "from": {"uri": uri, "digest": ""},
        "post": post,
        "target": {"owner": "", "scope": "group", "name": "tools", "definition-hash": "h"},
    }
    request = RunRequest.from_assignment(
        node_pb2.Assignment(
            run_id=13,
            workflow_id="8d0c7f52-0b8e-4a3c-9d61-3f2b1e0a9c47",
            stage_name="images.tools",
            job_json=json.dumps(payload),
        )
    )
    output: list[bytes] = []

    async def scenario() -> RunOutcome:
        execution = driver_for(
            request, node, lambda _run, s, d: output.append(d) if s == "stdout" else None
        )
        try:
            return (await execution.start()) or (await execution.wait())
        finally:
            execution.destroy()

    outcome = asyncio.run(scenario())
    return outcome, b"".join(output).decode()


@pytest.mark.root
def test_a_builds_post_script_runs_with_the_bases_env_in_its_working_dir(
    node: NodeServices, local_registry: Any
) -> None:
    uri = push_config_image(
        local_registry.url,
        "build-base",
        {"Env": ["PATH=/opt/conda/bin:/bin", "GREETING=base"], "WorkingDir": "/srv/app"},
    )

    _, output = _build(node, uri, 'echo "$PATH"; echo "$GREETING"; pwd; echo "$HOME"')

    assert output == "/opt/conda/bin:/bin\nbase\n/srv/app\n/root\n"


@pytest.mark.root
def test_a_builds_post_script_keeps_the_default_path_when_the_base_sets_none(
    node: NodeServices, local_registry: Any
) -> None:
    uri = push_config_image(local_registry.url, "build-bare", {})

    _, output = _build(node, uri, 'echo "$PATH"; pwd')

    assert output == f"{DEFAULT_PATH}\n/\n"
