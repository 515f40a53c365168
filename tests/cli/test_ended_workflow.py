"""What ``fuzzball workflow start -w`` prints once the workflow ends, line for line as the
real CLI (the Federate article's output): formatted from the API's ``Workflow`` message."""

from __future__ import annotations

from datetime import UTC, datetime

from google.protobuf.timestamp_pb2 import Timestamp

from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.cli.workflow_remote_cmd import ended_workflow


def _at(hour: int, minute: int, second: int) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(datetime(2024, 11, 14, hour, minute, second, tzinfo=UTC))
    return stamp


def _article_workflow() -> pb.Workflow:
    return pb.Workflow(
        id="c54f7397-ffb6-465c-ab50-b3df6a34ff68",
        name="hello-world.fz",
        email="admin@ciq.com",
        user_id="02ec4bc8-7862-4df6-b125-90be7f57f064",
        status=pb.STAGE_STATUS_FINISHED,
        cluster_name="fuzzball-aws-orchestrate-federate",
        create_time=_at(4, 5, 3),
        start_time=_at(4, 5, 4),
        end_time=_at(4, 5, 56),
        jobs=[
            pb.WorkflowStage(
                name="images.docker://alpine:latest",
                kind=pb.STAGE_KIND_IMAGE,
                status=pb.STAGE_STATUS_FINISHED,
                start_time=_at(4, 5, 8),
                end_time=_at(4, 5, 33),
            ),
            pb.WorkflowStage(
                name="jobs.hello-world",
                kind=pb.STAGE_KIND_JOB,
                status=pb.STAGE_STATUS_FINISHED,
                start_time=_at(4, 5, 53),
                end_time=_at(4, 5, 55),
            ),
        ],
    )


def test_the_ended_workflow_reads_as_the_articles_lines():
    lines = [line.rstrip() for line in ended_workflow(_article_workflow()).splitlines()]
    assert lines[:10] == [
        "Name: hello-world.fz",
        "Email: admin@ciq.com",
        "UserId: 02ec4bc8-7862-4df6-b125-90be7f57f064",
        "Status: STAGE_STATUS_FINISHED",
        "Cluster: fuzzball-aws-orchestrate-federate",
        "Created: 2024-11-14 04:05:03AM",
        "Started: 2024-11-14 04:05:04AM",
        "Finished: 2024-11-14 04:05:56AM",
        "Error:",
        "Stages:",
    ]
    table = [[cell.strip() for cell in line.split("|")] for line in lines[10:]]
    assert table == [
        ["KIND", "STATUS", "NAME", "STARTED", "FINISHED"],
        [
            "Workflow",
            "Finished",
            "c54f7397-ffb6-465c-ab50-b3df6a34ff68",
            "2024-11-14 04:05:03AM",
            "2024-11-14 04:05:56AM",
        ],
        [
            "Image",
            "Finished",
            "docker://alpine:latest",
            "2024-11-14 04:05:08AM",
            "2024-11-14 04:05:33AM",
        ],
        ["Job", "Finished", "hello-world", "2024-11-14 04:05:53AM", "2024-11-14 04:05:55AM"],
    ]


def test_an_unknown_status_shows_its_reason_after_the_status():
    workflow = _article_workflow()
    workflow.status = pb.STAGE_STATUS_UNKNOWN
    workflow.status_reason = "cluster aws does not answer: unreachable (connection refused)"
    lines = ended_workflow(workflow).splitlines()
    assert lines[3:5] == [
        "Status: STAGE_STATUS_UNKNOWN",
        "Reason: cluster aws does not answer: unreachable (connection refused)",
    ]
