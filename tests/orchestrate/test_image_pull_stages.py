"""The engine's image pull stages, with the node played by hand: a job waits for the pull of
its image, a failed pull skips the jobs using it, and a workflow pulls unless a live node
already holds the image at its digest.

The image is a ``fuzzball://`` one held by Orchestrate's real object cache, so pinning at
submission needs no registry."""

from __future__ import annotations

import json

import pytest

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.config import parse_config
from fuzzball_core.drivers import ResolvedImage
from fuzzball_core.orchestrate.image_stages import configure_images
from fuzzball_core.store.object_cache import CacheAddress

PULL = "images.fuzzball://user/tools"
WORKFLOW = """
version: v1
jobs:
  first:
    image: {uri: fuzzball://user/tools}
    command: [/bin/true]
  second:
    image: {uri: fuzzball://user/tools}
    command: [/bin/true]
"""


@pytest.fixture
def images(harness, tmp_path):
    """The harness with image stages on, its object cache holding the user's ``tools``."""
    config = parse_config({"data-dir": str(tmp_path / "data")})
    cache = configure_images(harness.engine, harness.service, config)
    cache.store(CacheAddress.checked(harness.user.account_id, "user", "tools"), [b"erofs"])
    return harness


def _by_stage(assignments: list[node_pb2.Assignment]) -> dict[str, node_pb2.Assignment]:
    return {a.stage_name: a for a in assignments}


def test_the_pull_stage_is_assigned_first_and_jobs_wait_for_it(images) -> None:
    node = images.node()
    workflow_id = images.submit(WORKFLOW)

    assigned = images.assignments()
    assert [a.stage_name for a in assigned] == [PULL]
    payload = json.loads(assigned[0].job_json)
    assert payload["kind"] == "image-pull" and payload["digest"].startswith("sha256:")
    images.start(node, assigned[0].run_id)
    images.engine.step()
    assert images.assignments() == []
    assert images.stages(workflow_id)["jobs.first"] == "PENDING"

    images.run_to_end(node, assigned[0])

    assert set(_by_stage(images.assignments())) == {"jobs.first", "jobs.second"}
    assert images.stages(workflow_id)[PULL] == "FINISHED"


def test_a_failed_pull_fails_its_stage_and_cancels_the_jobs_using_it(images) -> None:
    node = images.node()
    workflow_id = images.submit(WORKFLOW)
    (pull,) = images.assignments()

    images.start(node, pull.run_id)
    images.exit(node, pull.run_id, -1, message="image fuzzball://user/tools could not be pulled")
    images.engine.step()

    stages = images.stages(workflow_id)
    assert stages[PULL] == "FAILED"
    assert stages["jobs.first"] == stages["jobs.second"] == "CANCELED"
    assert images.status(workflow_id) == "FAILED"
    assert images.assignments() == []
    view = images.service.get_workflow(images.user, workflow_id)
    first = next(s for s in view.stages if s.name == "jobs.first")
    assert first.message == f"skipped: {PULL} failed"


def test_a_second_workflows_pull_of_an_image_a_live_node_holds_finishes_without_a_run(
    images,
) -> None:
    node = images.node()
    earlier = images.submit(WORKFLOW)
    (first_pull,) = images.assignments()
    images.run_to_end(node, first_pull)
    images.assignments()

    later = images.submit(WORKFLOW)

    assert set(_by_stage(images.assignments())) == {"jobs.first", "jobs.second"}
    assert images.stages(later)[PULL] == "FINISHED"
    assert images.stages(earlier)[PULL] == "FINISHED"
    cached = [e for e in images.service.list_events(images.user, later) if e.kind == "image_cached"]
    assert [e.message for e in cached] == [f"{PULL}: already pulled at this digest on node n1"]


def test_a_pull_whose_only_holder_is_gone_runs_again_for_the_next_workflow(images) -> None:
    holder = images.node("n1")
    images.submit(WORKFLOW)
    (first_pull,) = images.assignments()
    images.run_to_end(holder, first_pull)
    for job in images.assignments():
        images.run_to_end(holder, job)
    images.clock.now += 10
    other = images.node("n2")
    images.clock.now += 10  # n1's lease (15 s) has run out, n2's has not
    images.engine.step()

    later = images.submit(WORKFLOW)

    (second_pull,) = images.assignments()
    assert (second_pull.workflow_id, list(second_pull.node_ids)) == (later, [other])
    assert json.loads(second_pull.job_json) == json.loads(first_pull.job_json)


def test_progress_reports_of_a_pull_become_image_progress_events(images) -> None:
    node = images.node()
    workflow_id = images.submit(WORKFLOW)
    (pull,) = images.assignments()
    images.start(node, pull.run_id)

    report = {"step": "download sha256:ab", "done": 5, "total": 10}
    images.report(
        node,
        log=node_pb2.LogData(
            run_id=pull.run_id, stream="progress", data=json.dumps(report).encode()
        ),
    )
    images.engine.step()

    progress = [
        e
        for e in images.service.list_events(images.user, workflow_id)
        if e.kind == "image_progress"
    ]
    assert [e.message for e in progress] == [f"{PULL}: download sha256:ab: 50% (5 B of 10 B)"]
    assert images.service.read_logs(images.user, workflow_id) == []


def test_a_pull_whose_node_is_lost_runs_again_on_another_node(images) -> None:
    first_node = images.node("n1")
    workflow_id = images.submit(WORKFLOW)
    (pull,) = images.assignments()
    images.start(first_node, pull.run_id)
    images.engine.step()
    images.clock.now += 10
    second_node = images.node("n2")
    images.clock.now += 10  # n1's lease (15 s) has run out, n2's has not
    images.engine.step()

    (again,) = images.assignments()
    assert (again.stage_name, list(again.node_ids)) == (PULL, [second_node])
    images.run_to_end(second_node, again)
    assert images.stages(workflow_id)[PULL] == "FINISHED"
    assert "retried" in images.events(workflow_id)


# -- registry images: pinned at submission, every run carries the pin ----------------------------


class MovingTag:
    """A registry backend stand-in whose tag names a new digest at each pin (pushed again
    between any two submissions); counts its round trips."""

    def __init__(self) -> None:
        self.pins = 0

    def resolve(self, uri: str, *, credentials=None) -> ResolvedImage:
        self.pins += 1
        return ResolvedImage(uri, f"sha256:{self.pins:064x}", 1, "linux/amd64")


def _registry_workflow(cache_ttl: int | None = None) -> str:
    ttl = "" if cache_ttl is None else f", cache-ttl: {cache_ttl}"
    return (
        "version: v1\njobs:\n"
        f"  one: {{image: {{uri: docker://r.test/x:1{ttl}}}, command: [/bin/true]}}\n"
    )


@pytest.fixture
def moving(images) -> MovingTag:
    backend = MovingTag()
    images.engine.images._backends["docker"] = backend
    return backend


def test_a_jobs_image_uri_carries_the_digest_its_submission_pinned(images, moving) -> None:
    node = images.node()
    images.submit(_registry_workflow())
    (pull,) = images.assignments()
    images.run_to_end(node, pull)

    (job,) = images.assignments()

    pinned = json.loads(pull.job_json)["digest"]
    assert json.loads(job.job_json)["image"]["uri"] == f"docker://r.test/x:1@{pinned}"


def test_each_submission_pins_its_image_afresh_without_a_cache_ttl(images, moving) -> None:
    images.submit(_registry_workflow())
    images.submit(_registry_workflow())
    assert moving.pins == 2


def test_a_submission_reuses_a_pin_younger_than_its_images_cache_ttl(images, moving) -> None:
    images.submit(_registry_workflow(cache_ttl=600))
    images.submit(_registry_workflow(cache_ttl=600))
    assert moving.pins == 1
