"""A node's warning about how it set up a job's run (a GPU job on a node whose driver
libraries were not found) becomes a ``stage_warning`` event of the job, naming that node."""

from __future__ import annotations

import json

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.orchestrate.run_warnings import warning_event
from fuzzball_core.vocabulary import EventKind

WORKFLOW = """
version: v1
jobs:
  gpu:
    image: {uri: docker://nvidia/cuda:12.4.1-base-ubuntu22.04}
    command: [nvidia-smi]
"""
WARNING = (
    "NVIDIA driver libraries not found on this node: no NVIDIA driver libraries in /etc/ld.so.cache"
)


def test_a_nodes_warning_becomes_a_stage_warning_event_of_the_job(harness) -> None:
    node, workflow_id, assignment = harness.started(WORKFLOW)

    harness.report(
        node,
        log=node_pb2.LogData(
            run_id=assignment.run_id,
            stream="progress",
            data=json.dumps({"warning": WARNING}).encode(),
        ),
    )
    harness.engine.step()

    (event,) = [
        e
        for e in harness.service.list_events(harness.user, workflow_id)
        if e.kind == "stage_warning"
    ]
    assert (event.stage_name, event.node_id) == ("jobs.gpu", node)
    assert event.message == f"jobs.gpu: {WARNING}"
    assert event.data == {"warning": WARNING}
    assert harness.service.read_logs(harness.user, workflow_id) == []


def test_an_image_steps_report_is_not_a_warning() -> None:
    report = {"step": "download sha256:ab", "done": 5, "total": 10}

    assert warning_event("images.x", json.dumps(report).encode()) is None


def test_a_warning_is_kept_to_its_first_two_thousand_characters() -> None:
    kind, message, details = warning_event("jobs.gpu", json.dumps({"warning": "w" * 5000}).encode())  # type: ignore[misc]

    assert kind is EventKind.STAGE_WARNING
    assert len(details["warning"]) == 2000 and message == f"jobs.gpu: {'w' * 2000}"
