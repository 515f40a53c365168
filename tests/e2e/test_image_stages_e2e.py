"""Images as stages: pulls pinned at submission and watched, workflow-built images stored in
and served from the object cache, through Orchestrate, two Substrates and a local registry."""

from __future__ import annotations

import pytest
from support.cluster import Cluster, LocalRegistry
from support.oci_pusher import Pusher, busybox_entries, file, layer

from fuzzball_core.errors import InvalidArgument, NotFound

pytestmark = [pytest.mark.root, pytest.mark.slow]

BUILD = """
version: v1
images:
  tools:
    from: {uri: docker://alpine:latest}
    files: {/opt/greeting: "built {marker}\\n"}
    post: |
      echo building tools
      cp /opt/greeting /opt/copied
jobs:
  use:
    image: {uri: fuzzball://user/tools}
    command: [/bin/cat, /opt/copied]
"""


def _stage(view, name: str):
    return next(s for s in view.stages if s.name == name)


def _kinds(orchestrate, workflow_id: str, stage: str) -> list[str]:
    return [e.kind for e in orchestrate.events(workflow_id) if e.stage_name == stage]


def _pushed(local_registry: LocalRegistry, repository: str, greeting: bytes) -> str:
    """A busybox image with ``/greeting``, pushed as ``repository:1``, that no other test
    pulls (the session's cluster keeps what its nodes pulled); its ``docker://`` URI."""
    pusher = Pusher(local_registry.url)
    try:
        pusher.push_image(
            f"library/{repository}", "1", [layer([*busybox_entries(), file("greeting", greeting)])]
        )
    finally:
        pusher.close()
    return f"docker://{repository}:1"


def _greeting_job(uri: str) -> str:
    """A workflow of one job printing ``/greeting`` of the image ``uri``."""
    return (
        f"version: v1\njobs:\n  hi:\n    image: {{uri: {uri}}}\n"
        "    command: [/bin/cat, /greeting]\n"
    )


def test_a_registry_image_is_a_stage_with_resolve_and_progress_events(
    cluster: Cluster, local_registry: LocalRegistry
) -> None:
    orchestrate = cluster.orchestrate
    uri = _pushed(local_registry, "first-pull", b"pulled\n")
    workflow_id = orchestrate.start_workflow(_greeting_job(uri))
    view = orchestrate.wait_for(workflow_id)

    assert view.status == "FINISHED", view
    pull = _stage(view, f"images.{uri}")
    assert pull.kind.lower() == "image" and pull.status == "FINISHED"
    kinds = _kinds(orchestrate, workflow_id, f"images.{uri}")
    assert kinds[0] == "image_resolved"
    assert "image_progress" in kinds
    steps = {
        e.data.get("step") for e in orchestrate.events(workflow_id) if e.kind == "image_progress"
    }
    assert "done" in steps
    assert orchestrate.logs(workflow_id, "jobs.hi") == "pulled\n"


def test_the_pull_of_an_image_a_node_already_pulled_ends_as_cached_without_a_run(
    cluster: Cluster, local_registry: LocalRegistry
) -> None:
    orchestrate = cluster.orchestrate
    uri = _pushed(local_registry, "second-pull", b"again\n")
    first = orchestrate.start_workflow(_greeting_job(uri))
    assert orchestrate.wait_for(first).status == "FINISHED"

    second = orchestrate.start_workflow(_greeting_job(uri))
    view = orchestrate.wait_for(second)

    assert view.status == "FINISHED", view
    kinds = _kinds(orchestrate, second, f"images.{uri}")
    assert "image_cached" in kinds and "container_exited" not in kinds
    assert orchestrate.logs(second, "jobs.hi") == "again\n"


def test_a_missing_image_fails_the_submission(cluster: Cluster) -> None:
    with pytest.raises(NotFound, match=r"images\.docker://alpine:nope"):
        cluster.orchestrate.start_workflow(
            "version: v1\njobs:\n  hi:\n    image: {uri: docker://alpine:nope}\n"
            "    command: [/bin/true]\n"
        )


def test_a_workflow_built_image_is_built_stored_and_reused_on_resubmission(
    cluster: Cluster,
) -> None:
    orchestrate = cluster.orchestrate
    workflow = BUILD.replace("{marker}", "once")
    first = orchestrate.start_workflow(workflow, name="build-1")
    view = orchestrate.wait_for(first, timeout=120)

    assert view.status == "FINISHED", view
    assert orchestrate.logs(first, "jobs.use") == "built once\n"
    assert "building tools" in orchestrate.logs(first, "images.tools")
    assert "container_exited" in _kinds(orchestrate, first, "images.tools")

    second = orchestrate.start_workflow(workflow, name="build-2")
    again = orchestrate.wait_for(second, timeout=120)

    assert again.status == "FINISHED", again
    kinds = _kinds(orchestrate, second, "images.tools")
    assert "image_cached" in kinds and "container_exited" not in kinds
    assert orchestrate.logs(second, "jobs.use") == "built once\n"


def test_an_object_cache_image_runs_a_job_in_another_workflow(cluster: Cluster) -> None:
    orchestrate = cluster.orchestrate
    built = orchestrate.start_workflow(
        BUILD.replace("{marker}", "shared").replace("tools", "shared-tools"), name="build-shared"
    )
    assert orchestrate.wait_for(built, timeout=120).status == "FINISHED"

    user = orchestrate.start_workflow(
        "version: v1\njobs:\n  reuse:\n    image: {uri: fuzzball://user/shared-tools}\n"
        "    command: [/bin/cat, /opt/copied]\n"
    )
    view = orchestrate.wait_for(user)

    assert view.status == "FINISHED", view
    assert orchestrate.logs(user, "jobs.reuse") == "built shared\n"


def test_a_missing_object_cache_image_fails_the_submission(cluster: Cluster) -> None:
    with pytest.raises(NotFound, match="fuzzball://user/never-built"):
        cluster.orchestrate.start_workflow(
            "version: v1\njobs:\n  hi:\n    image: {uri: fuzzball://user/never-built}\n"
            "    command: [/bin/true]\n"
        )


def test_circular_image_builds_are_rejected_at_submission(cluster: Cluster) -> None:
    with pytest.raises(InvalidArgument, match="image build cycle"):
        cluster.orchestrate.start_workflow("""
version: v1
images:
  a: {from: {uri: fuzzball://user/b}, post: "true"}
  b: {from: {uri: fuzzball://user/a}, post: "true"}
jobs:
  hi: {image: {uri: fuzzball://user/a}, command: [/bin/true]}
""")


def test_an_image_for_another_architecture_fails_the_submission(
    cluster: Cluster, local_registry: LocalRegistry
) -> None:
    pusher = Pusher(local_registry.url)
    try:
        pusher.push_image(
            "library/foreign", "1", [layer([file("hello", b"hi\n")])], architecture="s390x"
        )
    finally:
        pusher.close()

    with pytest.raises(InvalidArgument, match=r"images\.docker://foreign:1: no linux/.* image"):
        cluster.orchestrate.start_workflow(
            "version: v1\njobs:\n  hi:\n    image: {uri: docker://foreign:1}\n"
            "    command: [/bin/true]\n"
        )
