"""``fuzzball context|workflow|node`` commands against a live REST server."""

from __future__ import annotations

import json
import re
import threading
import time

import pytest
import yaml
from support.live_api import HELLO, TASKS
from support.sql_stack import ADMIN

from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.cli.workflow_remote_cmd import WAIT_POLL_INTERVAL, BlockedReasons
from fuzzball_core.errors import InvalidArgument, NotFound, PermissionDenied, Unauthenticated
from fuzzball_core.service.views import FAILED, FINISHED, STARTED

# -- contexts -------------------------------------------------------------------------------


def test_context_create_writes_the_real_cli_file(fuzzball):
    result = fuzzball(
        "context", "create", "lab", "--address", "api.example.org:443", "--token", "s3cret"
    )
    assert result.exit_code == 0
    assert result.output == 'Context "lab" created (active).\n'
    document = yaml.safe_load(fuzzball.config_file.read_text())
    assert document["activeContext"] == "lab"
    assert document["contexts"][0]["auth"] == {"credentials": {"token": "s3cret"}}


def test_context_list_formats_never_show_the_token(logged_in):
    logged_in("context", "create", "other", "--address", "other.example.org:443")
    table = logged_in("context", "list")
    rows = [[cell.strip() for cell in line.split("|")] for line in table.output.splitlines()]
    assert rows == [
        ["ACTIVE", "NAME", "ADDRESS", "ACCOUNT ID", "LOGGED IN"],
        ["*", "lab", logged_in.rest_url, "", "yes"],
        ["", "other", "other.example.org:443", "", "no"],
    ]
    as_json = json.loads(logged_in("context", "list", "-o", "json").output)
    assert [(c["name"], c["active"], c["loggedIn"]) for c in as_json] == [
        ("lab", True, True),
        ("other", False, False),
    ]
    as_yaml = yaml.safe_load(logged_in("context", "list", "-o", "yaml").output)
    assert as_yaml == as_json
    for fmt in ("table", "json", "yaml"):
        assert logged_in.token not in logged_in("context", "list", "-o", fmt).output


def test_context_use_switches_and_refuses_unknown_names(logged_in):
    logged_in("context", "create", "other", "--address", "other.example.org:443")
    assert logged_in("context", "use", "other").output == 'Switched to context "other".\n'
    assert yaml.safe_load(logged_in.config_file.read_text())["activeContext"] == "other"
    result = logged_in("context", "use", "nope")
    assert isinstance(result.exception, NotFound)
    assert "known contexts: lab, other" in str(result.exception)


def _context(fuzzball, name: str) -> dict:
    document = yaml.safe_load(fuzzball.config_file.read_text())
    return next(c for c in document["contexts"] if c["name"] == name)


def test_logout_removes_the_active_contexts_tokens_and_keeps_the_rest(logged_in):
    document = yaml.safe_load(logged_in.config_file.read_text())
    document["contexts"][0]["auth"]["credentials"]["refreshToken"] = "r3fresh"
    logged_in.config_file.write_text(yaml.safe_dump(document))

    result = logged_in("context", "logout")

    assert result.output == 'Logged out of context "lab": its tokens are removed.\n'
    lab = _context(logged_in, "lab")
    assert lab["auth"] == {"credentials": {"token": ""}}
    assert lab["address"] == logged_in.rest_url
    assert "r3fresh" not in logged_in.config_file.read_text()
    assert isinstance(logged_in("workflow", "list").exception, Unauthenticated)


def test_logout_of_a_named_context_leaves_the_active_one_logged_in(logged_in):
    logged_in("context", "create", "other", "--address", "o.example.org:443", "--token", "t2")
    assert logged_in("context", "logout", "other").exit_code == 0
    assert _context(logged_in, "other")["auth"]["credentials"]["token"] == ""
    assert _context(logged_in, "lab")["auth"]["credentials"]["token"] == logged_in.token


def test_logout_of_a_context_without_a_token_says_so(logged_in):
    logged_in("context", "logout")
    assert logged_in("context", "logout").output == 'Context "lab" held no token.\n'


def test_delete_removes_a_context_and_its_token(logged_in):
    logged_in("context", "create", "other", "--address", "o.example.org:443", "--token", "t2")
    result = logged_in("context", "delete", "other")
    assert result.output == 'Context "other" deleted.\n'
    document = yaml.safe_load(logged_in.config_file.read_text())
    assert [c["name"] for c in document["contexts"]] == ["lab"]
    assert (document["activeContext"], "t2" in logged_in.config_file.read_text()) == ("lab", False)


def test_deleting_the_active_context_leaves_none_active(logged_in):
    result = logged_in("context", "delete", "lab")
    assert "No context is active now" in result.output
    assert yaml.safe_load(logged_in.config_file.read_text()) == {"contexts": []}
    listed = logged_in("workflow", "list")
    assert isinstance(listed.exception, NotFound)
    assert "no active context" in str(listed.exception)


@pytest.mark.parametrize("command", [("delete", "nope"), ("logout", "nope")])
def test_delete_and_logout_of_an_unknown_context_list_the_known_ones(logged_in, command):
    result = logged_in("context", *command)
    assert isinstance(result.exception, NotFound)
    assert "'nope' does not exist (known contexts: lab)" in str(result.exception)


def test_context_login_with_a_token_stores_it(logged_in):
    assert logged_in("context", "login", "--token", "fresh").exit_code == 0
    document = yaml.safe_load(logged_in.config_file.read_text())
    assert document["contexts"][0]["auth"]["credentials"]["token"] == "fresh"


def test_login_without_an_oidc_server_asks_for_a_token(logged_in):
    result = logged_in("context", "login")
    assert result.exit_code != 0
    assert "--token" in str(result.exception)


def test_commands_without_a_context_say_how_to_make_one(fuzzball):
    result = fuzzball("workflow", "list")
    assert isinstance(result.exception, NotFound)
    assert "fuzzball context create" in str(result.exception)


def test_a_wrong_token_is_reported_as_unauthenticated(logged_in):
    logged_in("context", "login", "--token", "wrong")
    result = logged_in("workflow", "list")
    assert isinstance(result.exception, Unauthenticated)


# -- workflows ------------------------------------------------------------------------------


@pytest.fixture
def hello_file(tmp_path):
    path = tmp_path / "hello.yaml"
    path.write_text(HELLO)
    return path


def test_start_sends_the_file_unchanged_and_prints_the_id(logged_in, hello_file):
    result = logged_in("workflow", "start", str(hello_file), "--name", "greeting")
    assert result.exit_code == 0, result.output
    (workflow,) = logged_in.service.list_workflows(logged_in.who)
    assert result.output == f'Workflow "{workflow.id}" started.\n'
    assert workflow.name == "greeting"
    assert logged_in.service.get_workflow(logged_in.who, workflow.id).raw_specification == HELLO


@pytest.mark.parametrize("name", ["", "  "])
def test_start_with_an_empty_name_is_refused_and_starts_nothing(logged_in, hello_file, name):
    result = logged_in("workflow", "start", str(hello_file), "--name", name)
    assert result.exit_code == 2
    assert "--name" in result.output and "must not be empty" in result.output
    assert logged_in.service.list_workflows(logged_in.who) == []


def test_start_of_an_invalid_file_reports_the_field_path(logged_in, tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text(HELLO.replace("cores: 1", "cores: lots"))
    result = logged_in("workflow", "start", str(broken))
    assert isinstance(result.exception, InvalidArgument)
    assert "jobs.hello" in str(result.exception)


def _finish_first_workflow_later(fuzzball, status: str) -> threading.Thread:
    def run() -> None:
        deadline = time.time() + 10
        while not fuzzball.service.list_workflows(fuzzball.who) and time.time() < deadline:
            time.sleep(0.02)
        (workflow,) = fuzzball.service.list_workflows(fuzzball.who)
        fuzzball.service.set_stage(workflow.id, "jobs.hello", STARTED)
        time.sleep(0.6)
        fuzzball.service.set_stage(
            workflow.id, "jobs.hello", status, exit_code=0 if status == FINISHED else 2
        )

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_start_wait_follows_stages_and_exits_zero_on_success(logged_in, hello_file):
    finisher = _finish_first_workflow_later(logged_in, FINISHED)
    result = logged_in("workflow", "start", str(hello_file), "--wait")
    finisher.join()
    assert result.exit_code == 0, result.output
    progress = result.stderr.splitlines()
    assert "jobs.hello: STARTED" in progress
    assert "jobs.hello: FINISHED (exited with code 0)" in progress
    assert progress[-1].endswith('" finished.')


def _stop_first_workflow_once_blocked(fuzzball, polls: int) -> threading.Thread:
    """Stops the first workflow once a ``scheduling_blocked`` event was recorded for it and
    ``start --wait`` has polled ``polls`` times more."""

    def run() -> None:
        deadline = time.time() + 10
        while time.time() < deadline:
            workflows = fuzzball.service.list_workflows(fuzzball.who)
            recorded = (
                fuzzball.service.list_events(fuzzball.who, workflows[0].id) if workflows else []
            )
            if any(event.kind == "scheduling_blocked" for event in recorded):
                break
            time.sleep(0.02)
        time.sleep(polls * WAIT_POLL_INTERVAL)
        fuzzball.service.stop_workflow(fuzzball.who, workflows[0].id)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_start_wait_says_once_why_a_job_waits_for_a_node(logged_in, hello_file):
    logged_in.service.add_hold(ADMIN, "node-1", "cordon", "maintenance")
    stopper = _stop_first_workflow_once_blocked(logged_in, polls=3)
    result = logged_in("workflow", "start", str(hello_file), "--wait")
    stopper.join()
    progress = result.stderr.splitlines()
    reason = "waiting: jobs.hello: 0/1 nodes available: 1 held (cordon by admin)"
    assert progress.count(reason) == 1, result.stderr
    assert progress.index("jobs.hello: PENDING") < progress.index(reason)


def test_a_blocked_reason_is_shown_again_only_when_it_changes():
    def blocked(stage: str, message: str) -> pb.WorkflowEvent:
        return pb.WorkflowEvent(kind="scheduling_blocked", stage_name=stage, message=message)

    reasons = BlockedReasons()
    first = [blocked("jobs.a", "jobs.a: 1 held"), blocked("jobs.b", "jobs.b: 1 held")]
    assert reasons.lines(first) == ["waiting: jobs.a: 1 held", "waiting: jobs.b: 1 held"]
    assert reasons.lines([blocked("jobs.a", "jobs.a: 1 held")]) == []
    assert reasons.lines([blocked("jobs.a", "jobs.a: 1 not ready")]) == [
        "waiting: jobs.a: 1 not ready"
    ]
    assert reasons.lines([pb.WorkflowEvent(kind="stage_started", stage_name="jobs.a")]) == []


def test_start_wait_prints_the_ended_workflow_as_the_real_cli_does(logged_in, hello_file):
    finisher = _finish_first_workflow_later(logged_in, FINISHED)
    result = logged_in("workflow", "start", "-w", str(hello_file))
    finisher.join()
    (workflow,) = logged_in.service.list_workflows(logged_in.who)
    lines = result.stdout.splitlines()
    assert lines[0] == f'Workflow "{workflow.id}" started.'
    assert [line.split(":")[0] for line in lines[1:11]] == [
        "Name",
        "Email",
        "UserId",
        "Status",
        "Cluster",
        "Created",
        "Started",
        "Finished",
        "Error",
        "Stages",
    ]
    assert lines[1] == "Name: hello.yaml"
    assert lines[4] == "Status: STAGE_STATUS_FINISHED"
    assert lines[5] == "Cluster: fuzzball"
    assert re.fullmatch(r"Created: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d[AP]M", lines[6])
    assert lines[9] == "Error:"
    table = [[cell.strip() for cell in line.split("|")] for line in lines[11:]]
    assert table[0] == ["KIND", "STATUS", "NAME", "STARTED", "FINISHED"]
    assert [row[:3] for row in table[1:]] == [
        ["Workflow", "Finished", workflow.id],
        ["Job", "Finished", "hello"],
    ]


def test_start_wait_logs_prints_each_jobs_output_at_the_end(logged_in, hello_file):
    def run() -> None:
        deadline = time.time() + 10
        while not logged_in.service.list_workflows(logged_in.who) and time.time() < deadline:
            time.sleep(0.02)
        (workflow,) = logged_in.service.list_workflows(logged_in.who)
        logged_in.service.set_stage(workflow.id, "jobs.hello", STARTED)
        logged_in.service.emit_log(workflow.id, "jobs.hello", "Hello, world!\n")
        time.sleep(0.3)
        logged_in.service.set_stage(workflow.id, "jobs.hello", FINISHED, exit_code=0)

    finisher = threading.Thread(target=run)
    finisher.start()
    result = logged_in("workflow", "start", str(hello_file), "--wait", "--logs")
    finisher.join()
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[-2:] == ["==> jobs.hello <==", "Hello, world!"]


def test_start_logs_without_wait_is_a_usage_error(logged_in, hello_file):
    result = logged_in("workflow", "start", str(hello_file), "--logs")
    assert result.exit_code == 2
    assert "--logs needs --wait" in result.output


def test_start_wait_exits_non_zero_when_the_workflow_fails(logged_in, hello_file):
    finisher = _finish_first_workflow_later(logged_in, FAILED)
    result = logged_in("workflow", "start", str(hello_file), "--wait")
    finisher.join()
    assert result.exit_code == 1
    assert "jobs.hello: FAILED (exited with code 2)" in result.output
    last = result.stderr.splitlines()[-1]
    assert last.endswith('" failed: jobs.hello failed: exited with code 2.')


def test_workflow_list_in_every_format(logged_in):
    workflow_id = logged_in.service.start_workflow(
        logged_in.who, raw_specification=HELLO, name="hello"
    )
    table = logged_in("workflow", "list").output.splitlines()
    assert [h.strip() for h in table[0].split("|")] == ["ID", "NAME", "EMAIL", "STATUS", "CLUSTER"]
    assert [c.strip() for c in table[1].split("|")] == [
        workflow_id,
        "hello",
        "",
        "Started",
        "fuzzball",
    ]
    as_json = json.loads(logged_in("workflow", "list", "-o", "json").output)
    assert [(w["id"], w["status"]) for w in as_json] == [(workflow_id, "STAGE_STATUS_STARTED")]
    assert yaml.safe_load(logged_in("workflow", "list", "-o", "yaml").output) == as_json


def test_workflow_list_tail_shows_only_the_newest(logged_in):
    for name in ("first", "second", "third"):
        logged_in.service.start_workflow(logged_in.who, raw_specification=HELLO, name=name)
    table = logged_in("workflow", "list", "-t", "2").output.splitlines()
    assert [line.split("|")[1].strip() for line in table[1:]] == ["third", "second"]


def test_describe_shows_a_header_and_a_stage_table(logged_in):
    workflow_id = logged_in.service.start_workflow(
        logged_in.who, raw_specification=HELLO, name="hello"
    )
    logged_in.service.set_stage(workflow_id, "jobs.hello", FINISHED, exit_code=0)
    lines = logged_in("workflow", "describe", workflow_id).output.splitlines()
    assert lines[0] == "Name:     hello"
    assert lines[1] == f"ID:       {workflow_id}"
    assert lines[2] == "Status:   FINISHED"
    assert lines[3].startswith("Created:  20")
    stage_table = lines[lines.index("") + 1 :]
    assert [h.strip() for h in stage_table[0].split("|")] == [
        "KIND",
        "STATUS",
        "NAME",
        "STARTED",
        "FINISHED",
    ]
    job_row = next(r for r in stage_table if "jobs.hello" in r)
    assert [c.strip() for c in job_row.split("|")][:3] == ["Job", "FINISHED", "jobs.hello"]
    as_json = json.loads(logged_in("workflow", "describe", workflow_id, "-o", "json").output)
    assert as_json["id"] == workflow_id
    assert any(s["name"] == "jobs.hello" for s in as_json["jobs"])


def test_status_in_table_and_json(logged_in):
    workflow_id = logged_in.service.start_workflow(logged_in.who, raw_specification=HELLO)
    output = logged_in("workflow", "status", workflow_id).output
    assert output.splitlines()[0] == f"Workflow {workflow_id}: STARTED"
    assert "PENDING" in output
    as_yaml = yaml.safe_load(logged_in("workflow", "status", workflow_id, "-o", "yaml").output)
    assert as_yaml["workflowStatus"] == "STAGE_STATUS_STARTED"


def test_describe_of_an_unknown_workflow_is_not_found(logged_in):
    result = logged_in("workflow", "describe", "nope")
    assert isinstance(result.exception, NotFound)


def test_logs_prints_a_jobs_output(logged_in):
    workflow_id = logged_in.service.start_workflow(logged_in.who, raw_specification=HELLO)
    logged_in.service.emit_log(workflow_id, "jobs.hello", "hello\n")
    logged_in.service.emit_log(workflow_id, "jobs.hello", "world\n")
    result = logged_in("workflow", "logs", workflow_id, "hello")
    assert result.exit_code == 0
    assert result.output == "hello\nworld\n"


def test_logs_task_selects_one_task(logged_in):
    workflow_id = logged_in.service.start_workflow(logged_in.who, raw_specification=TASKS)
    logged_in.service.emit_log(workflow_id, "jobs.hello", "one\n", task_id=1)
    logged_in.service.emit_log(workflow_id, "jobs.hello", "two\n", task_id=2)
    assert logged_in("workflow", "logs", workflow_id, "hello", "--task", "2").output == "two\n"


def test_logs_of_a_task_outside_the_array_is_refused_naming_its_range(logged_in):
    workflow_id = logged_in.service.start_workflow(logged_in.who, raw_specification=TASKS)
    result = logged_in("workflow", "logs", workflow_id, "hello", "--task", "99")
    assert isinstance(result.exception, InvalidArgument)
    assert "jobs.hello has tasks 1 to 2, not 99" in str(result.exception)


def test_logs_of_a_task_of_a_job_that_is_no_array_is_refused(logged_in):
    workflow_id = logged_in.service.start_workflow(logged_in.who, raw_specification=HELLO)
    result = logged_in("workflow", "logs", workflow_id, "hello", "--task", "1")
    assert isinstance(result.exception, InvalidArgument)
    assert "jobs.hello is not a task array" in str(result.exception)


def test_logs_follow_prints_until_the_workflow_ends(logged_in):
    workflow_id = logged_in.service.start_workflow(logged_in.who, raw_specification=HELLO)
    logged_in.service.emit_log(workflow_id, "jobs.hello", "early\n")

    def finish_later() -> None:
        time.sleep(0.3)
        logged_in.service.emit_log(workflow_id, "jobs.hello", "late\n")
        logged_in.service.set_stage(workflow_id, "jobs.hello", FINISHED, exit_code=0)

    writer = threading.Thread(target=finish_later)
    writer.start()
    result = logged_in("workflow", "logs", workflow_id, "hello", "--follow")
    writer.join()
    assert result.output == "early\nlate\n"


def test_logs_of_an_unknown_job_is_not_found(logged_in):
    workflow_id = logged_in.service.start_workflow(logged_in.who, raw_specification=HELLO)
    result = logged_in("workflow", "logs", workflow_id, "nosuch")
    assert isinstance(result.exception, NotFound)
    assert "nosuch" in str(result.exception)


def test_events_in_every_format(logged_in):
    workflow_id = logged_in.service.start_workflow(logged_in.who, raw_specification=HELLO)
    table = logged_in("workflow", "events", workflow_id).output.splitlines()
    assert [h.strip() for h in table[0].split("|")] == ["TIME", "KIND", "STAGE", "MESSAGE"]
    assert "workflow_started" in table[1]
    as_json = json.loads(logged_in("workflow", "events", workflow_id, "-o", "json").output)
    assert as_json[0]["kind"] == "workflow_started"
    assert (
        yaml.safe_load(logged_in("workflow", "events", workflow_id, "-o", "yaml").output) == as_json
    )


def test_stop_cancels_the_workflow(logged_in):
    workflow_id = logged_in.service.start_workflow(logged_in.who, raw_specification=HELLO)
    assert (
        logged_in("workflow", "stop", workflow_id).output == f'Workflow "{workflow_id}" stopped.\n'
    )
    assert logged_in.service.get_workflow(logged_in.who, workflow_id).status == "CANCELED"


# -- nodes ----------------------------------------------------------------------------------


def test_node_list_in_every_format(admin):
    node = admin.service.add_node("n1", 4, 2 * 1024**3, devices={"gpu": 2})
    table = admin("node", "list").output.splitlines()
    assert [h.strip() for h in table[0].split("|")] == [
        "ID",
        "NAME",
        "STATUS",
        "CORES",
        "MEMORY",
        "DEVICES",
        "RUNNING JOBS",
        "HOLDS",
    ]
    assert [c.strip() for c in table[1].split("|")] == [
        node.id,
        "n1",
        "READY",
        "4",
        "2 GiB",
        "gpu=2",
        "0",
        "-",
    ]
    as_json = json.loads(admin("node", "list", "-o", "json").output)
    assert [n["hostName"] for n in as_json] == ["n1", "node-1"]
    assert yaml.safe_load(admin("node", "list", "-o", "yaml").output) == as_json


def test_node_show_by_name(admin):
    admin.service.add_node("n1", 4, 2 * 1024**3, annotations={"rack": "a"})
    lines = admin("node", "show", "n1").output.splitlines()
    assert "Name:        n1" in lines
    assert "Cores:       0 of 4 used" in lines
    assert "Annotations: rack=a" in lines
    as_json = json.loads(admin("node", "show", "n1", "-o", "json").output)
    assert as_json["hostName"] == "n1"


def test_node_show_lists_the_running_jobs(logged_in, admin):
    workflow_id = logged_in.service.start_workflow(logged_in.who, raw_specification=HELLO)
    logged_in.service.set_stage(workflow_id, "jobs.hello", STARTED)
    lines = admin("node", "show", "node-1").output.splitlines()
    assert "Cores:       1 of 8 used" in lines
    assert [h.strip() for h in lines[-2].split("|")] == ["WORKFLOW", "JOB"]


def test_node_show_of_an_unknown_node_is_not_found(admin):
    assert isinstance(admin("node", "show", "ghost").exception, NotFound)


def test_node_list_as_a_user_is_permission_denied(logged_in):
    assert isinstance(logged_in("node", "list").exception, PermissionDenied)


def test_start_names_the_workflow_after_its_file_by_default(logged_in, hello_file):
    assert logged_in("workflow", "start", str(hello_file)).exit_code == 0
    (workflow,) = logged_in.service.list_workflows(logged_in.who)
    assert workflow.name == hello_file.name
