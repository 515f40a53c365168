"""Volumes in the engine: where a job's volumes live travels with its assignment, and jobs go
where their volumes are (a node-local persistent volume's node; the node where their
workflow already uses a volume nodes do not share), never split silently."""

from __future__ import annotations

import json

import pytest

from fuzzball_core.errors import FailedPrecondition
from fuzzball_core.orchestrate import storage_catalog as catalog
from fuzzball_core.orchestrate.workflow_volumes import installed_driver

PERSISTENT = """version: v4
volumes:
  results: {reference: volume://user/persistent/results}
jobs:
  write:
    image: {uri: docker://alpine:latest}
    command: [touch, /results/out]
    mounts: {/results: results}
"""

TWO_JOBS = """version: v4
volumes:
  data: {reference: REFERENCE}
jobs:
  first:
    image: {uri: docker://alpine:latest}
    command: [touch, /data/x]
    mounts: {/data: data}
  second:
    image: {uri: docker://alpine:latest}
    command: [cat, /data/x]
    mounts: {/data: data}
    depends-on: [{name: first}]
"""


def assigned(harness) -> list[tuple[str, object]]:
    return [(node, message.assign) for node, message in harness.sent("assign")]


def test_a_persistent_volume_reaches_the_node_as_its_storage_location(harness) -> None:
    harness.node("n1")
    harness.submit(PERSISTENT)
    ((node, assignment),) = assigned(harness)
    location = json.loads(assignment.volumes_json)["results"]
    assert location["driver"] == "local"
    assert location["storageClass"] == "persistent"
    assert location["volumeId"] and location["workflowId"] is None
    assert location["nodeId"] == node


def test_a_node_local_volume_pins_later_jobs_to_its_node_and_why_says_so(harness) -> None:
    first_node = harness.node("n1")
    harness.submit(PERSISTENT)
    ((node, assignment),) = assigned(harness)
    assert node == first_node
    harness.run_to_end(node, assignment)
    harness.node("n2")
    harness.service.add_hold(harness.admin, "n1", "cordon", "maintenance")
    second = harness.submit(PERSISTENT)
    assert assigned(harness) == []  # n2 is free, but the volume lives on n1
    (why,) = harness.service.explain_workflow(harness.user, second)
    assert "held (cordon by admin)" in why.message
    assert "annotations mismatch" in why.message
    assert why.message.endswith("; its volumes keep it on n1")


def test_jobs_sharing_an_unshared_ephemeral_volume_stay_on_one_node(harness) -> None:
    harness.node("n1")
    harness.node("n2")
    workflow = harness.submit(TWO_JOBS.replace("REFERENCE", "volume://user/ephemeral"))
    ((node, first),) = assigned(harness)
    harness.service.add_hold(harness.admin, node, "cordon", "maintenance")
    harness.run_to_end(node, first)
    assert assigned(harness) == []  # the other node is free, but the volume is on this one
    why = {e.stage_name: e for e in harness.service.explain_workflow(harness.user, workflow)}
    assert "held (cordon by admin)" in why["jobs.second"].message


def test_jobs_sharing_a_shared_class_volume_may_run_on_two_nodes(harness) -> None:
    with harness.engine.sessions() as session:
        catalog.ensure_defaults(session, 0.0)
        catalog.create_class(
            session,
            {"name": "scratch", "driver": "hostpath", "parameters": {"root": "/srv/shared"}},
            installed_driver,
            0.0,
        )
        session.commit()
    harness.node("n1")
    harness.node("n2")
    harness.submit(TWO_JOBS.replace("REFERENCE", "volume://user/scratch"))
    ((node, first),) = assigned(harness)
    harness.service.add_hold(harness.admin, node, "cordon", "maintenance")
    harness.run_to_end(node, first)
    ((other, second),) = assigned(harness)
    assert other != node
    assert json.loads(first.volumes_json) == json.loads(second.volumes_json)
    assert json.loads(second.volumes_json)["data"]["parameters"] == {"root": "/srv/shared"}


def test_a_disabled_storage_class_refuses_the_submission_naming_it(harness) -> None:
    harness.node("n1")
    with harness.engine.sessions() as session:
        catalog.ensure_defaults(session, 0.0)
        catalog.set_class_status(session, "persistent", catalog.DISABLED, 0.0)
        session.commit()
    with pytest.raises(FailedPrecondition, match="storage class 'persistent' is disabled"):
        harness.submit(PERSISTENT)


def test_jobs_placed_in_one_pass_never_split_an_unshared_volume(harness) -> None:
    harness.node("n1", cores=1)
    harness.node("n2", cores=1)
    side_by_side = TWO_JOBS.replace("REFERENCE", "volume://user/ephemeral").replace(
        "    depends-on: [{name: first}]\n", ""
    )
    harness.submit(side_by_side.replace("mounts:", "resource: {cpu: {cores: 1}}\n    mounts:"))
    ((node, first),) = assigned(harness)  # room for both, but not on one node at once
    harness.run_to_end(node, first)
    ((other, _second),) = assigned(harness)
    assert other == node
