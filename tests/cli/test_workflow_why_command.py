"""``fuzzball workflow why``: the scheduler's reasons for each waiting stage, through the CLI
against the real service and the live REST server."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import yaml
from support.sql_stack import ADMIN

from fuzzball_core.cli.workflow_remote_cmd import duration_words, estimated_start
from fuzzball_core.service.views import FINISHED, STARTED

GIB = 1024**3
TWO_STEPS = """\
version: v1
jobs:
  first:
    image: {{uri: docker://alpine:latest}}
    command: ["true"]
    resource: {resource}
  second:
    image: {{uri: docker://alpine:latest}}
    command: ["true"]
    resource: {{cpu: {{cores: 1}}, memory: {{size: 1GB}}}}
    depends-on: [{{name: first}}]
"""
ONE_CORE = "{cpu: {cores: 1}, memory: {size: 1GB}}"
#: One job taking every core of node-1 for at most ten minutes.
FILLER = """\
version: v1
jobs:
  first:
    image: {uri: docker://alpine:latest}
    command: ["true"]
    policy: {timeout: {execute: 10m}}
    resource: {cpu: {cores: 8}, memory: {size: 1GB}}
"""


def start(cli, resource: str = ONE_CORE) -> str:
    return cli.service.start_workflow(
        cli.who, raw_specification=TWO_STEPS.format(resource=resource), name="two-steps"
    )


def wait_for_verdict(cli, workflow_id: str, stage: str = "jobs.first") -> None:
    """Until the scheduler has passed over the stage once and said why it left it."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        reasons = {e.stage_name: e.reason for e in cli.service.explain_workflow(ADMIN, workflow_id)}
        if reasons.get(stage) not in (None, "WAITING"):
            return
        time.sleep(0.02)
    raise AssertionError(f"{stage} never got a scheduling verdict")


def why_rows(cli, *args: str) -> list[list[str]]:
    result = cli("workflow", "why", *args)
    assert result.exit_code == 0, result.output
    return [[cell.strip() for cell in line.split("|")] for line in result.output.splitlines()]


def test_why_names_the_hold_keeping_a_job_off_the_only_node(logged_in):
    logged_in.service.add_hold(ADMIN, "node-1", "cordon", "maintenance")
    workflow_id = start(logged_in)
    wait_for_verdict(logged_in, workflow_id)
    header, first, second = why_rows(logged_in, workflow_id)
    assert header == ["STAGE", "STATUS", "REASON", "DETAILS", "ESTIMATED START"]
    assert first == [
        "jobs.first",
        "PENDING",
        "INSUFFICIENT_RESOURCES",
        "0/1 nodes available: 1 held (cordon by admin)",
        "no estimate",
    ]
    assert second[:3] == ["jobs.second", "PENDING", "WAITING_ON_DEPENDENCY"]
    assert "jobs.first" in second[3]


def test_why_names_an_annotation_mismatch_when_the_matching_node_is_held(logged_in):
    logged_in.service.add_node("rack-a", 8, 16 * GIB, annotations={"rack": "a"})
    logged_in.service.add_node("rack-b", 8, 16 * GIB, annotations={"rack": "b"})
    logged_in.service.add_hold(ADMIN, "rack-a", "cordon", "maintenance")
    workflow_id = start(logged_in, "{cpu: {cores: 1}, annotations: {rack: a}}")
    wait_for_verdict(logged_in, workflow_id)
    first = why_rows(logged_in, workflow_id)[1]
    assert first[2] == "NODE_ANNOTATIONS_MISMATCH"
    assert "2 annotations mismatch" in first[3]
    assert "1 held (cordon by admin)" in first[3]


def test_why_names_the_missing_gpu_when_the_only_gpu_node_is_offline(logged_in):
    logged_in.service.add_node(
        "gpu-1", 8, 16 * GIB, devices={"nvidia.com/gpu": 1}, lease_seconds=0.1
    )
    logged_in.service.wait_for_node_status("gpu-1", "OFFLINE")
    workflow_id = start(logged_in, "{cpu: {cores: 1}, devices: {nvidia.com/gpu: 1}}")
    wait_for_verdict(logged_in, workflow_id)
    first = why_rows(logged_in, workflow_id)[1]
    assert first[:2] == ["jobs.first", "PENDING"]
    assert "1 missing device nvidia.com/gpu" in first[3]
    assert "1 not ready" in first[3]


def test_why_estimates_when_a_job_waiting_for_room_can_start(logged_in):
    running = logged_in.service.start_workflow(logged_in.who, raw_specification=FILLER)
    logged_in.service.set_stage(running, "jobs.first", STARTED)
    workflow_id = start(logged_in)
    wait_for_verdict(logged_in, workflow_id)
    first = why_rows(logged_in, workflow_id)[1]
    assert first[2] == "INSUFFICIENT_RESOURCES"
    assert first[4].startswith("estimated start in 9m (") or first[4].startswith(
        "estimated start in 10m ("
    )
    assert first[4].endswith("Z)")


def test_why_shows_only_waiting_stages_and_all_adds_finished_ones(logged_in):
    workflow_id = start(logged_in)
    logged_in.service.set_stage(workflow_id, "jobs.first", FINISHED)
    waiting = why_rows(logged_in, workflow_id)
    assert [row[0] for row in waiting[1:]] == ["jobs.second"]
    everything = why_rows(logged_in, workflow_id, "--all")
    assert [row[:3] for row in everything[1:2]] == [["jobs.first", "FINISHED", "FINISHED"]]
    assert [row[0] for row in everything[1:]] == ["jobs.first", "jobs.second"]


def test_why_prints_the_api_objects_as_json_and_yaml(logged_in):
    logged_in.service.add_hold(ADMIN, "node-1", "cordon", "maintenance")
    workflow_id = start(logged_in)
    wait_for_verdict(logged_in, workflow_id)
    as_json = json.loads(logged_in("workflow", "why", workflow_id, "-o", "json").output)
    assert [(s["stageName"], s["reason"]) for s in as_json] == [
        ("jobs.first", "INSUFFICIENT_RESOURCES"),
        ("jobs.second", "WAITING_ON_DEPENDENCY"),
    ]
    as_yaml = yaml.safe_load(logged_in("workflow", "why", workflow_id, "-o", "yaml").output)
    assert as_yaml == as_json


def test_why_with_nothing_waiting_says_so(logged_in):
    workflow_id = start(logged_in)
    logged_in.service.set_stage(workflow_id, "jobs.first", FINISHED)
    logged_in.service.set_stage(workflow_id, "jobs.second", FINISHED)
    result = logged_in("workflow", "why", workflow_id)
    assert result.output == (
        f"No stage of workflow {workflow_id} is waiting (--all shows every stage).\n"
    )


def test_an_estimate_reads_as_a_duration_and_a_utc_time():
    now = datetime(2026, 12, 2, 15, 26, 0, tzinfo=UTC)
    assert estimated_start(datetime(2026, 12, 2, 15, 30, tzinfo=UTC), now) == (
        "estimated start in 4m (2026-12-02T15:30:00Z)"
    )
    assert estimated_start(datetime(2026, 12, 2, 15, 0, tzinfo=UTC), now) == (
        "estimated start now (2026-12-02T15:00:00Z)"
    )
    assert estimated_start(None, now) == "no estimate"


def test_durations_keep_their_two_largest_units():
    assert [duration_words(s) for s in (45, 240, 7500, 7200, 273600)] == [
        "45s",
        "4m",
        "2h 5m",
        "2h",
        "3d 4h",
    ]
