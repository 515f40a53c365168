"""When a volume's egress stage may start, as the plan answers it: after every job and service
mounting the volume has ended, whatever their outcome, and never while one still runs."""

from __future__ import annotations

import json

import pytest

from fuzzball_core.errors import InvalidArgument
from fuzzball_core.orchestrate.capabilities import refused_fields
from fuzzball_core.orchestrate.egress_stage import payload
from fuzzball_core.spec import Plan, StageKind, parse_workflow, plan_workflow

EGRESS = "volumes.data.egress"

SPEC = """\
version: v4
volumes:
  data:
    reference: volume://user/ephemeral
    egress:
      - source: {uri: "file://out/result.txt"}
        destination: {uri: "s3://results/result.txt", secret: "secret://user/s3"}
        policy: {retry: {attempts: 2}}
  other: {reference: volume://user/ephemeral}
services:
  writer:
    image: {uri: docker://alpine:latest}
    command: [sleep, "600"]
    mounts: {/data: data}
jobs:
  first:
    image: {uri: docker://alpine:latest}
    command: [/bin/sh, -c, "echo 1 > /data/out/result.txt"]
    mounts: {/data: data}
  second:
    image: {uri: docker://alpine:latest}
    command: [/bin/sh, -c, "echo 2 >> /data/out/result.txt"]
    mounts: {/data: data}
    depends-on: [{name: first}]
  elsewhere:
    image: {uri: docker://alpine:latest}
    command: ["true"]
    mounts: {/other: other}
"""


@pytest.fixture
def plan() -> Plan:
    return plan_workflow(parse_workflow(SPEC))


def _ready(plan: Plan, finished=(), failed=(), canceled=(), started=()) -> list[str]:
    base = {"volumes.data", "volumes.other"}
    return plan.advance(
        base | set(finished), set(failed), set(canceled), started=set(started)
    ).ready


def test_a_volume_with_egress_gets_a_file_stage_after_its_volume(plan) -> None:
    stage = plan.stages[EGRESS]

    assert stage.kind is StageKind.FILE and stage.name == "data"
    assert plan.topological_order()[-1] == EGRESS


def test_egress_waits_for_every_job_and_service_mounting_the_volume(plan) -> None:
    sources = {edge.source for edge in plan.dependencies_of(EGRESS)}

    assert sources == {"volumes.data", "services.writer", "jobs.first", "jobs.second"}
    assert EGRESS not in _ready(plan, finished={"jobs.first", "jobs.second"})


def test_egress_starts_once_every_step_mounting_the_volume_ended(plan) -> None:
    ended = {"services.writer", "jobs.first", "jobs.second"}

    assert EGRESS in _ready(plan, finished=ended)


def test_egress_still_starts_after_a_job_failed_and_its_dependent_was_skipped(plan) -> None:
    ready = _ready(plan, finished={"services.writer"}, failed={"jobs.first"})

    assert EGRESS in ready


def test_egress_is_not_held_by_a_job_that_does_not_mount_the_volume(plan) -> None:
    ended = {"services.writer", "jobs.first", "jobs.second"}

    assert EGRESS in _ready(plan, finished=ended, started={"jobs.elsewhere"})


def test_a_canceled_volume_cancels_its_egress(plan) -> None:
    skipped = plan.advance(set(), set(), {"volumes.data"}).skipped

    assert EGRESS in skipped


def test_the_payload_names_the_volume_and_carries_only_the_secrets_reference(plan) -> None:
    document = json.loads(payload("data", plan.stages[EGRESS].definition))

    assert document == {
        "kind": "volume-egress",
        "volume": "data",
        "transfers": [
            {
                "source": "out/result.txt",
                "destination": "s3://results/result.txt",
                "secret": "secret://user/s3",
                "retries": 2,
            }
        ],
    }


def test_a_well_formed_egress_is_accepted_at_submission(plan) -> None:
    assert [problem for stage in plan for problem in refused_fields(stage)] == []


def test_an_egress_source_outside_the_volume_is_refused_naming_it() -> None:
    spec = SPEC.replace("file://out/result.txt", "https://example.org/result.txt")
    plan = plan_workflow(parse_workflow(spec))

    problems = [problem for stage in plan for problem in refused_fields(stage)]

    assert problems == [
        ("volumes.data.egress[0].source.uri", "must be file://PATH, a file inside the volume")
    ]


def test_an_egress_to_a_bucket_without_a_key_is_refused_naming_it() -> None:
    spec = SPEC.replace("s3://results/result.txt", "s3://results")
    plan = plan_workflow(parse_workflow(spec))

    problems = [problem for stage in plan for problem in refused_fields(stage)]

    assert problems == [
        (
            "volumes.data.egress[0].destination.uri",
            "must be s3://BUCKET/KEY: only S3 objects are sent to",
        )
    ]


def test_a_volume_named_like_another_volumes_egress_stage_is_refused() -> None:
    spec = SPEC.replace("  other:", "  data.egress:").replace("volume: other", "volume: x")
    spec = spec.replace("/other: other", "/other: data.egress")

    with pytest.raises(InvalidArgument, match=r"volumes\.data\.egress: the volume data\.egress"):
        plan_workflow(parse_workflow(spec))
