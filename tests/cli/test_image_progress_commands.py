"""Image pulls' progress in ``fuzzball workflow start --wait`` and ``fuzzball workflow logs``,
against the live REST server with image stages on and the node played by hand; output is
not a terminal here, so progress comes as plain lines."""

from __future__ import annotations

import json
import threading
import time

import pytest

from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.cli.image_progress import ImageProgress
from fuzzball_core.config import parse_config
from fuzzball_core.orchestrate.image_stages import configure_images
from fuzzball_core.service.views import FINISHED, STARTED
from fuzzball_core.store.object_cache import CacheAddress

PULL = "images.fuzzball://user/tools"
WORKFLOW = """\
version: v1
jobs:
  hello:
    image: {uri: fuzzball://user/tools}
    command: [/bin/true]
"""
STEPS = [
    {"step": "download sha256:abc", "done": 512, "total": 2048},
    {"step": "download sha256:abc", "done": 2048, "total": 2048},
    {"step": "convert", "done": 1, "total": 1},
    {"step": "done", "done": 1, "total": 1},
]


@pytest.fixture
def with_images(logged_in, tmp_path):
    """The server's engine with image stages on; the object cache holds alice's ``tools``."""
    stack = logged_in.service
    config = parse_config({"data-dir": str(tmp_path / "data")})
    cache = stack._on_loop(lambda: configure_images(stack.engine, stack.service, config))
    cache.store(CacheAddress.checked(logged_in.who.account_id, "user", "tools"), [b"erofs"])
    return logged_in


def _report_progress(cli, workflow_id: str) -> None:
    stack = cli.service
    run_id = stack._run_id(workflow_id, PULL, None)
    stack.set_stage(workflow_id, PULL, STARTED)
    for step in STEPS:
        log = node_pb2.LogData(run_id=run_id, stream="progress", data=json.dumps(step).encode())
        stack._send(node_pb2.NodeMessage(log=log))
    count = len(STEPS) + 1  # and the submission's image_resolved
    who = cli.who
    stack._settle(lambda: len(stack.service.list_events(who, workflow_id)) > count)


def _only_workflow(cli) -> str:
    deadline = time.time() + 10
    while not cli.service.list_workflows(cli.who) and time.time() < deadline:
        time.sleep(0.02)
    (workflow,) = cli.service.list_workflows(cli.who)
    return workflow.id


def test_start_wait_prints_each_pull_step_before_the_pull_stage_finishes(
    with_images, tmp_path
) -> None:
    path = tmp_path / "tools.yaml"
    path.write_text(WORKFLOW)

    def node() -> None:
        workflow_id = _only_workflow(with_images)
        _report_progress(with_images, workflow_id)
        time.sleep(0.6)  # the CLI polls and shows the progress meanwhile
        with_images.service.set_stage(workflow_id, PULL, FINISHED)
        with_images.service.set_stage(workflow_id, "jobs.hello", FINISHED)

    thread = threading.Thread(target=node)
    thread.start()
    result = with_images("workflow", "start", str(path), "--wait")
    thread.join()

    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert (
        lines.index(f"{PULL}: download sha256:abc: 25% (512 B of 2.0 KiB)")
        < lines.index(f"{PULL}: download sha256:abc: 100% (2.0 KiB of 2.0 KiB)")
        < lines.index(f"{PULL}: convert: done")
        < lines.index(f"{PULL}: image ready")
    )
    finished = f"{PULL}: FINISHED (exited with code 0)"
    assert (
        lines.index(f"{PULL}: STARTED")
        < lines.index(f"{PULL}: image ready")
        < lines.index(finished)
        < lines.index("jobs.hello: FINISHED (exited with code 0)")
    )


def test_logs_of_an_image_stage_prints_its_recorded_progress(with_images) -> None:
    workflow_id = with_images.service.start_workflow(with_images.who, raw_specification=WORKFLOW)
    _report_progress(with_images, workflow_id)

    result = with_images("workflow", "logs", workflow_id, PULL)

    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith(f"{PULL}: resolved to sha256:")
    assert lines[1:] == [
        f"{PULL}: download sha256:abc: 25% (512 B of 2.0 KiB)",
        f"{PULL}: download sha256:abc: 100% (2.0 KiB of 2.0 KiB)",
        f"{PULL}: convert: done",
        f"{PULL}: image ready",
    ]


def test_logs_follow_of_a_job_shows_its_image_pull_until_the_job_starts(with_images) -> None:
    workflow_id = with_images.service.start_workflow(with_images.who, raw_specification=WORKFLOW)

    def node() -> None:
        _report_progress(with_images, workflow_id)
        time.sleep(0.6)
        with_images.service.set_stage(workflow_id, PULL, FINISHED)
        with_images.service.emit_log(workflow_id, "jobs.hello", "hi\n")
        with_images.service.set_stage(workflow_id, "jobs.hello", FINISHED)

    thread = threading.Thread(target=node)
    thread.start()
    result = with_images("workflow", "logs", workflow_id, "hello", "--follow")
    thread.join()

    assert result.exit_code == 0, result.output
    assert result.stdout == "hi\n"
    assert f"{PULL}: download sha256:abc: 25% (512 B of 2.0 KiB)" in result.stderr.splitlines()
    assert f"{PULL}: image ready" in result.stderr.splitlines()


def _progress_event(step: dict) -> pb.WorkflowEvent:
    """An ``image_progress`` event of the pull, as the API client hands it to the CLI."""
    event = pb.WorkflowEvent(kind="image_progress", stage_name=PULL, message="m")
    event.data.update(step)
    return event


def test_on_a_terminal_each_stage_step_is_a_bar_filled_when_the_image_is_ready() -> None:
    with ImageProgress(terminal=True) as progress:
        progress.feed(_progress_event(step) for step in STEPS[:1])
        halfway = progress.bars()
        progress.feed(_progress_event(step) for step in STEPS[2:])
        ready = progress.bars()

    assert halfway == {(PULL, "download sha256:abc"): (512, 2048)}
    assert ready == {
        (PULL, "download sha256:abc"): (2048, 2048),
        (PULL, "convert"): (1, 1),
    }
