"""``fuzzball workflow start|describe|events`` show what the server tells a user: the file's
warnings, the workflow's annotations, each stage's metered traffic and a failure's exit code."""

from __future__ import annotations

import json

import pytest
import yaml
from support.live_api import BOTH, TASKS, WARNED, warned

from fuzzball_core.cli.workflow_remote_cmd import byte_count
from fuzzball_core.service.views import FAILED, FINISHED

COUNTED = {
    "ingress_bytes": 3 * 1024 * 1024,
    "ingress_packets": 2100,
    "egress_bytes": 700,
    "egress_packets": 12,
}


@pytest.fixture
def warned_file(tmp_path):
    path = tmp_path / "warned.yaml"
    path.write_text(WARNED)
    return path


def started(logged_in, spec: str, stage: str = "jobs.hello", **report) -> str:
    """A workflow of ``spec`` started as the user, its stage ended as ``report`` says."""
    workflow_id = logged_in.service.start_workflow(logged_in.who, raw_specification=spec)
    if report:
        logged_in.service.set_stage(workflow_id, stage, **report)
    return workflow_id


def table_rows(lines: list[str]) -> list[list[str]]:
    return [[cell.strip() for cell in line.split("|")] for line in lines]


def test_start_prints_the_servers_warnings_on_stderr(logged_in, warned_file):
    result = logged_in("workflow", "start", str(warned_file))
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    assert all(line.startswith("warning: ") for line in lines)
    assert warned([line.removeprefix("warning: ") for line in lines]) == BOTH
    assert result.stdout.startswith('Workflow "')


def test_start_as_json_prints_the_id_and_the_warnings(logged_in, warned_file):
    result = logged_in("workflow", "start", str(warned_file), "-o", "json")
    assert result.exit_code == 0, result.output
    reply = json.loads(result.stdout)
    (workflow,) = logged_in.service.list_workflows(logged_in.who)
    assert reply["id"] == workflow.id
    assert warned(reply["warnings"]) == BOTH


def test_start_as_yaml_prints_the_same_reply(logged_in, warned_file):
    reply = yaml.safe_load(logged_in("workflow", "start", str(warned_file), "-o", "yaml").stdout)
    assert list(reply) == ["id", "warnings"]


def test_start_wait_takes_no_output_format(logged_in, warned_file):
    result = logged_in("workflow", "start", str(warned_file), "--wait", "-o", "json")
    assert result.exit_code == 2
    assert "--wait prints stage changes as text" in result.output
    assert logged_in.service.list_workflows(logged_in.who) == []


def test_describe_shows_the_annotations_sorted_under_the_header(logged_in):
    workflow_id = started(logged_in, WARNED)
    lines = logged_in("workflow", "describe", workflow_id).stdout.splitlines()
    assert "Annotations: team=genomics, zone=lab-2" in lines[: lines.index("")]


def test_describe_as_json_has_the_annotations(logged_in):
    workflow_id = started(logged_in, WARNED)
    shown = json.loads(logged_in("workflow", "describe", workflow_id, "-o", "json").stdout)
    assert shown["annotations"] == {"team": "genomics", "zone": "lab-2"}


def test_describe_shows_what_each_stage_received_and_sent(logged_in):
    workflow_id = started(logged_in, WARNED, status=FINISHED, metering=COUNTED)
    lines = logged_in("workflow", "describe", workflow_id).stdout.splitlines()
    rows = table_rows(lines[lines.index("") + 1 :])
    assert rows[0][-2:] == ["RECEIVED", "SENT"]
    job = next(row for row in rows if "jobs.hello" in row)
    assert job[-2:] == ["3.0 MiB", "700 B"]


def test_describe_as_json_sums_a_task_arrays_traffic(logged_in):
    workflow_id = started(logged_in, TASKS)
    for task in (1, 2):
        logged_in.service.set_stage(
            workflow_id, "jobs.hello", FINISHED, task_id=task, metering=COUNTED
        )
    shown = json.loads(logged_in("workflow", "describe", workflow_id, "-o", "json").stdout)
    job = next(stage for stage in shown["jobs"] if stage["name"] == "jobs.hello")
    assert job["details"]["metering"] == {
        "ingressBytes": str(6 * 1024 * 1024),
        "ingressPackets": "4200",
        "egressBytes": "1400",
        "egressPackets": "24",
    }


def test_events_as_json_show_the_exit_code_of_a_failed_stage(logged_in):
    workflow_id = started(logged_in, WARNED, status=FAILED, exit_code=5)
    shown = json.loads(logged_in("workflow", "events", workflow_id, "-o", "json").stdout)
    (failed,) = [event for event in shown if event["kind"] == "stage_failed"]
    assert failed["data"] == {"exit_code": 5}


@pytest.mark.parametrize(
    ("count", "shown"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1536, "1.5 KiB"),
        (20 * 1024**2, "20.0 MiB"),
        (3 * 1024**3, "3.0 GiB"),
        (5 * 1024**4, "5.0 TiB"),
    ],
)
def test_byte_counts_are_shown_in_binary_units(count, shown):
    assert byte_count(count) == shown
