"""Image stages at submission: disabled builds, pinned pulls, and build identity."""

from __future__ import annotations

import json

import pytest

from fuzzball_core.drivers import ResolvedImage
from fuzzball_core.errors import InvalidArgument
from fuzzball_core.orchestrate.image_stages import ImageStages, definition_hash, progress_event
from fuzzball_core.spec import parse_workflow, plan_workflow

WITH_BUILD = """
version: v1
images:
  tools: {from: {uri: docker://alpine:latest}, post: "apk add jq"}
jobs:
  use: {image: {uri: fuzzball://user/tools}, command: [jq]}
"""

PULL_ONLY = "version: v1\njobs:\n  a: {image: {uri: docker://alpine:3}, command: [/bin/true]}\n"


def test_disabled_image_builds_reject_a_workflow_with_images_saying_why() -> None:
    plan = plan_workflow(parse_workflow(WITH_BUILD), pull_stages=True)

    with pytest.raises(InvalidArgument) as error:
        ImageStages(enabled=True, builds_enabled=False).check_submission(plan, "someone")

    assert "images.tools" in str(error.value)
    assert "orchestrate.enable-workflow-image-builds is false" in str(error.value)


def test_a_build_is_identified_by_its_base_digest_files_and_post_script() -> None:
    build = parse_workflow(WITH_BUILD).model.images["tools"]
    same = definition_hash(build, "sha256:" + "a" * 64)

    assert definition_hash(build, "sha256:" + "a" * 64) == same
    assert definition_hash(build, "sha256:" + "b" * 64) != same
    changed = build.model_copy(update={"post": "apk add ripgrep"})
    assert definition_hash(changed, "sha256:" + "a" * 64) != same


def test_download_progress_becomes_an_event_with_a_percentage() -> None:
    kind, message, data = progress_event(
        "images.docker://alpine", b'{"step": "download sha256:ab", "done": 512, "total": 1024}'
    )

    assert kind == "image_progress"
    assert message == "images.docker://alpine: download sha256:ab: 50% (512 B of 1.0 KiB)"
    assert data == {"step": "download sha256:ab", "done": 512, "total": 1024}


def test_unreadable_progress_is_ignored() -> None:
    assert progress_event("images.x", b"not json") is None


def test_with_write_back_a_public_pull_names_its_group_address_in_the_object_cache() -> None:
    pull = (
        plan_workflow(parse_workflow(PULL_ONLY), pull_stages=True)
        .stages["images.docker://alpine:3"]
        .definition
    )
    pin = ResolvedImage("docker://alpine:3", "sha256:" + "c" * 64, 10, "linux/amd64")

    payload = json.loads(ImageStages(enabled=True, write_back=True).pull_payload(pull, pin, "acct"))

    assert payload["write-back"] == {
        "owner": "",
        "scope": "group",
        "name": "docker/alpine:3",
        "definition-hash": "sha256:" + "c" * 64,
    }


def test_without_write_back_a_pull_names_no_address() -> None:
    pull = (
        plan_workflow(parse_workflow(PULL_ONLY), pull_stages=True)
        .stages["images.docker://alpine:3"]
        .definition
    )

    payload = json.loads(ImageStages(enabled=True).pull_payload(pull, None, "acct"))

    assert payload["write-back"] is None


def test_an_abandoned_write_back_becomes_its_own_event_saying_the_pull_succeeded() -> None:
    report = {
        "step": "write-back",
        "done": 0,
        "total": 9,
        "status": "abandoned",
        "reason": "stalled: no progress for 5s (limit 5s)",
    }

    kind, message, data = progress_event("images.docker://alpine:3", json.dumps(report).encode())

    assert kind == "image_write_back_abandoned"
    assert message == (
        "images.docker://alpine:3: write-back abandoned (stalled: no progress for 5s"
        " (limit 5s)); the pull itself succeeded"
    )
    assert data["status"] == "abandoned"


def test_a_retried_write_back_says_which_attempt_failed_and_the_wait() -> None:
    report = {
        "step": "write-back",
        "done": 0,
        "total": 9,
        "status": "retrying",
        "attempt": 2,
        "delay": 0.5,
        "reason": "refused (503)",
    }

    kind, message, _ = progress_event("images.x", json.dumps(report).encode())

    assert kind == "image_write_back_retrying"
    assert message == "images.x: write-back attempt 2 failed (refused (503)); retrying in 0.5s"
