"""One assignment through its driver and the real runtime: image, command, output, exit,
stop, time-out; and which driver each kind of assignment gets."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from typing import Any

import pytest

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.spec.models import Job
from fuzzball_core.substrate.drivers import (
    NodeServices,
    RunOutcome,
    RunRequest,
    TaskDriver,
    container_hostname,
    driver_for,
    job_command,
    job_environment,
)
from fuzzball_core.substrate.run_secrets import RunSecrets

pytestmark = pytest.mark.root

WORKFLOW = "0b7f3c1e-5d2a-4f6b-8e9d-2c1a0f3b4d5e"


def _request(job: dict[str, Any], *, task: int | None = None, timeout: float = 0) -> RunRequest:
    definition = {"image": {"uri": "docker://alpine:latest"}, **job}
    return RunRequest.from_assignment(
        node_pb2.Assignment(
            run_id=7,
            workflow_id=WORKFLOW,
            stage_name="jobs.my_job",
            has_task=task is not None,
            task_id=task or 0,
            job_json=json.dumps(definition),
            timeout_seconds=timeout,
        )
    )


def _execute(
    node: NodeServices,
    request: RunRequest,
    *,
    while_running: Any = None,
) -> tuple[RunOutcome, list[tuple[str, bytes]]]:
    output: list[tuple[str, bytes]] = []

    async def scenario() -> RunOutcome:
        execution = driver_for(request, node, lambda _run, s, d: output.append((s, d)))
        try:
            outcome = await execution.start()
            if outcome is not None:
                return outcome
            if while_running is not None:
                await while_running(execution)
            return await execution.wait()
        finally:
            execution.destroy()

    return asyncio.run(scenario()), output


def _text(output: list[tuple[str, bytes]], stream: str) -> str:
    return b"".join(data for s, data in output if s == stream).decode()


def test_command_output_streams_and_exit_code_are_reported(node: NodeServices) -> None:
    request = _request({"command": ["/bin/sh", "-c", "echo out; echo err >&2; exit 4"]})

    outcome, output = _execute(node, request)

    assert (outcome.exit_code, outcome.signal, outcome.message) == (4, 0, "")
    assert not (outcome.canceled or outcome.timed_out or outcome.oom_killed)
    assert _text(output, "stdout") == "out\n"
    assert _text(output, "stderr") == "err\n"


def test_a_job_needing_no_secret_has_its_workflow_token_though_it_came_after_the_set_up(
    node: NodeServices,
) -> None:
    asked: list[int] = []

    async def slow_token(run_id: int) -> RunSecrets:
        asked.append(run_id)
        await asyncio.sleep(0.3)  # the container's set-up goes on meanwhile
        return RunSecrets(workflow_token="tok-7")

    node.run_secrets = slow_token
    request = _request({"command": ["/bin/sh", "-c", "echo $FB_WORKFLOW_TOKEN"]})

    outcome, output = _execute(node, request)

    assert (outcome.exit_code, asked) == (0, [7])
    assert _text(output, "stdout") == "tok-7\n"


def test_large_output_arrives_complete_in_bounded_chunks(node: NodeServices) -> None:
    request = _request({"command": ["/bin/sh", "-c", "head -c 300000 /dev/zero | tr '\\0' x"]})

    outcome, output = _execute(node, request)

    assert outcome.exit_code == 0
    assert _text(output, "stdout") == "x" * 300000
    assert max(len(data) for _, data in output) <= 64 * 1024


def test_script_runs_with_sh_from_a_read_only_directory_that_is_removed_afterwards(
    node: NodeServices,
) -> None:
    request = _request(
        {
            "script": "echo script $1 $2\ntouch /.fuzzball/x 2>/dev/null || echo read-only\n",
            "args": ["one", "two"],
        }
    )

    outcome, output = _execute(node, request)

    assert outcome.exit_code == 0
    assert _text(output, "stdout") == "script one two\nread-only\n"
    assert not (node.runs_dir / "7").exists()


def test_job_files_appear_at_their_paths_including_under_tmp(node: NodeServices) -> None:
    request = _request(
        {
            "command": [
                "/bin/sh",
                "-c",
                "cat /tmp/in/hello.py /etc/app.conf; echo more >> /etc/app.conf",
            ],
            "files": {"/tmp/in/hello.py": "print('hi')\n", "/etc/app.conf": "x=1\n"},
        }
    )

    outcome, output = _execute(node, request)

    assert outcome.exit_code == 0, _text(output, "stderr")
    assert _text(output, "stdout") == "print('hi')\nx=1\n"
    assert not (node.runs_dir / "7").exists()


def test_mounted_volume_is_the_workflows_directory_on_the_node(node: NodeServices) -> None:
    request = _request(
        {
            "command": ["/bin/sh", "-c", "echo kept > /data/file"],
            "mounts": {"/data": {"volume": "scratch"}},
        }
    )

    outcome, _ = _execute(node, request)

    assert outcome.exit_code == 0
    assert (node.volumes.volume_dir(WORKFLOW, "scratch") / "file").read_text() == "kept\n"


def test_stop_terminates_the_container_and_reports_it_canceled(node: NodeServices) -> None:
    request = _request({"command": ["/bin/sh", "-c", "exec sleep 600"]})

    async def cancel(execution: TaskDriver) -> None:
        await asyncio.sleep(0.2)
        execution.stop("canceled")

    began = time.monotonic()
    outcome, _ = _execute(node, request, while_running=cancel)

    assert outcome.canceled and not outcome.timed_out
    assert (outcome.exit_code, outcome.signal) == (-1, signal.SIGTERM)
    assert time.monotonic() - began < 60  # not the 600 s sleep


def test_timeout_kills_the_container_and_reports_it_timed_out(node: NodeServices) -> None:
    request = _request({"command": ["/bin/sh", "-c", "exec sleep 600"]}, timeout=0.5)

    outcome, _ = _execute(node, request)

    assert outcome.timed_out and not outcome.canceled
    assert outcome.signal == signal.SIGTERM


def test_an_image_that_cannot_be_pulled_fails_the_run_naming_the_image(
    node: NodeServices,
) -> None:
    request = _request({"image": {"uri": "docker://library/absent:1"}, "command": ["/bin/true"]})

    outcome, output = _execute(node, request)

    assert outcome.message.startswith("image docker://library/absent:1 could not be pulled:")
    assert outcome.exit_code == -1
    assert output == []


def test_task_environment_carries_the_fuzzball_variables_after_the_jobs_own() -> None:
    request = _request(
        {"command": ["/bin/true"], "env": ["A=1", "FB_TASK_ID=mine", "B=x=y"]}, task=5
    )

    env = job_environment(request, "my-job-5")

    assert env["A"] == "1" and env["B"] == "x=y"
    assert env["FB_TASK_ID"] == "5"
    assert env["FB_WORKFLOW_ID"] == WORKFLOW
    assert env["FB_JOB_NAME"] == "my_job"
    assert env["HOSTNAME"] == "my-job-5"


def test_hostname_is_the_job_name_as_a_dns_label() -> None:
    assert container_hostname(_request({"command": ["/bin/true"]}, task=12)) == "my-job-12"


def test_args_follow_the_command_or_the_script() -> None:
    job = Job.model_validate(
        {"image": {"uri": "docker://alpine"}, "command": ["/bin/echo"], "args": ["a"]}
    )

    assert job_command(job, None) == ["/bin/echo", "a"]
    assert job_command(job, "/.fuzzball/script") == ["/bin/sh", "/.fuzzball/script", "a"]


def test_a_service_assignment_is_read_with_its_network() -> None:
    definition = {
        "image": {"uri": "docker://alpine:latest"},
        "command": ["httpd", "-f"],
        "network": {"ports": [{"name": "http", "port": 8080}]},
    }
    request = RunRequest.from_assignment(
        node_pb2.Assignment(run_id=8, stage_name="services.web", job_json=json.dumps(definition))
    )
    assert request.job is not None and request.job.network.ports[0].port == 8080


def _image_request(stage: str, payload: dict[str, Any]) -> RunRequest:
    return RunRequest.from_assignment(
        node_pb2.Assignment(
            run_id=9, workflow_id=WORKFLOW, stage_name=stage, job_json=json.dumps(payload)
        )
    )


def test_an_image_pull_reports_its_progress_and_succeeds(node: NodeServices) -> None:
    request = _image_request(
        "images.docker://alpine:latest", {"kind": "image-pull", "uri": "docker://alpine:latest"}
    )

    outcome, output = _execute(node, request)

    assert (outcome.exit_code, outcome.message) == (0, "")
    steps = [json.loads(data)["step"] for stream, data in output if stream == "progress"]
    assert steps[-1] == "done"


def test_an_image_pull_of_an_image_ready_at_its_digest_succeeds_without_the_pull_pool(
    node: NodeServices,
) -> None:
    uri = "docker://alpine:latest"
    digest = node.images.backend("docker").resolve(uri).digest
    node.images.ensure(uri, digest=digest)
    node.pull_pool.shutdown()  # a pull now would fail to be scheduled
    request = _image_request(f"images.{uri}", {"kind": "image-pull", "uri": uri, "digest": digest})

    outcome, output = _execute(node, request)

    assert (outcome.exit_code, outcome.message) == (0, "")
    assert [json.loads(data) for stream, data in output if stream == "progress"] == [
        {"step": "done", "done": 1, "total": 1}
    ]


def test_a_build_runs_its_post_script_then_needs_somewhere_to_store_the_image(
    node: NodeServices,
) -> None:
    request = _image_request(
        "images.tools",
        {
            "kind": "image-build",
            "name": "tools",
            "from": {"uri": "docker://alpine:latest", "digest": ""},
            "files": {"/etc/motd": "built\n"},
            "post": "cat /etc/motd",
            "target": {"owner": "", "scope": "group", "name": "tools", "definition-hash": "h"},
        },
    )

    outcome, output = _execute(node, request)

    assert _text(output, "stdout") == "built\n"
    assert outcome.message == (
        "images.object-cache-url is not set on this node: the built image has nowhere to go"
    )
    assert not (node.runs_dir / "9").exists()
