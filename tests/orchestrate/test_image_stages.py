"""Image stages at submission: disabled builds, pinned pulls, and build identity."""

from __future__ import annotations

import pytest

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
    message, data = progress_event(
        "images.docker://alpine", b'{"step": "download sha256:ab", "done": 512, "total": 1024}'
    )

    assert message == "images.docker://alpine: download sha256:ab: 50% (512 B of 1.0 KiB)"
    assert data == {"step": "download sha256:ab", "done": 512, "total": 1024}


def test_unreadable_progress_is_ignored() -> None:
    assert progress_event("images.x", b"not json") is None
