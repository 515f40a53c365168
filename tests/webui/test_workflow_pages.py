"""The workflows pages and the editor over HTTP (no browser): the list's order, filters and
pages; a workflow's stages, graph, log, stop and rerun; the editor's server calls."""

from __future__ import annotations

import dataclasses
import re
import time

import httpx
import pytest
from support.webui_client import signed_in
from support.webui_stack import WebUiStack
from support.workflow_rows import add_workflows

from fuzzball_core.service.views import Principal
from fuzzball_core.store.models import Workflow
from fuzzball_core.vocabulary import Permission, Status
from fuzzball_core.webui.session import SESSION_COOKIE, csrf_token

pytestmark = pytest.mark.slow

HELLO = """version: v4
jobs:
  hello:
    image:
      uri: docker://alpine:3.19
    command: [echo, hello world]
    resource:
      cpu:
        cores: 1
      memory:
        size: 64MiB
"""
#: what the editor must carry through untouched: preemptible, retry, restart, images
KEEPS = """version: v4
preemptible: true
images:
  base:
    from:
      uri: docker://alpine:3.19
    post: echo built
jobs:
  first:
    image:
      uri: fuzzball://user/base
    command: [echo, one]
    preemptible: false
    policy:
      retry:
        attempts: 2
    resource: {cpu: {cores: 1}, memory: {size: 64MiB}}
  second:
    image:
      uri: docker://alpine:3.19
    command: [echo, two]
    depends-on:
      - name: first
    policy:
      restart: on-node-fault
    resource: {cpu: {cores: 1}, memory: {size: 64MiB}}
"""
UNDECLARED_VOLUME = """version: v4
jobs:
  hello:
    image:
      uri: docker://alpine:3.19
    command: [ls, /data]
    mounts:
      /data:
        volume: scratch
"""
V1 = """version: v1
jobs:
  hello:
    image:
      uri: docker://alpine:3.19
    command: [echo, hi]
    mounts:
      data:
        location: /data
volumes:
  data:
    reference: volume://user/ephemeral
"""


def start(client, csrf: str, text: str, name: str) -> str:
    """Start ``text`` from the editor's form; the new workflow's id."""
    answer = client.post("/editor/start", data={"csrf": csrf, "name": name, "specification": text})
    assert answer.status_code == 303, answer.text
    return answer.headers["location"].removeprefix("/workflows/")


def names_listed(html: str) -> list[str]:
    return re.findall(r'<th scope="row"><a href="/workflows/[^"]+">([^<]+)</a>', html)


def next_link(html: str) -> str | None:
    found = re.search(r'<a href="([^"]+)" rel="next">', html)
    return found[1].replace("&amp;", "&") if found else None


# -- the editor -----------------------------------------------------------------------------


def test_start_submits_the_text_exactly_as_typed(ui: WebUiStack) -> None:
    client, csrf = signed_in(ui, ui.member)
    workflow_id = start(client, csrf, KEEPS, "keeps-everything")
    stored = ui.stack.get_workflow(ui.admin_principal(), workflow_id)
    assert stored.raw_specification == KEEPS
    assert stored.name == "keeps-everything"


def test_start_without_the_csrf_token_is_refused(ui: WebUiStack) -> None:
    client, _ = signed_in(ui, ui.member)
    before = len(ui.stack.list_workflows(ui.admin_principal()))
    answer = client.post("/editor/start", data={"name": "forged", "specification": HELLO})
    assert answer.status_code == 403
    assert len(ui.stack.list_workflows(ui.admin_principal())) == before


def test_a_refused_start_shows_the_problem_at_its_line_and_keeps_the_text(ui: WebUiStack) -> None:
    client, csrf = signed_in(ui, ui.member)
    answer = client.post(
        "/editor/start", data={"csrf": csrf, "name": "bad", "specification": UNDECLARED_VOLUME}
    )
    assert answer.status_code == 400
    assert "Line 9: jobs.hello.mounts./data.volume" in answer.text
    assert "volume scratch is not declared in volumes" in answer.text
    assert 'data-line="9" class="has-error"' in answer.text
    assert "command: [ls, /data]" in answer.text


def test_check_places_a_mount_of_an_undeclared_volume_at_its_line(ui: WebUiStack) -> None:
    client, csrf = signed_in(ui, ui.member)
    answer = client.post(
        "/editor/check", json={"specification": UNDECLARED_VOLUME}, headers={"X-CSRF-Token": csrf}
    )
    assert answer.status_code == 200
    body = answer.json()
    assert body["valid"] is False
    assert body["problems"] == [
        {
            "severity": "error",
            "field": "jobs.hello.mounts./data.volume",
            "message": "volume scratch is not declared in volumes",
            "line": 9,
        }
    ]


def test_check_places_a_yaml_syntax_error_at_the_parsers_line(ui: WebUiStack) -> None:
    client, csrf = signed_in(ui, ui.member)
    text = "version: v4\njobs:\n  hello: [\n"
    answer = client.post(
        "/editor/check", json={"specification": text}, headers={"X-CSRF-Token": csrf}
    )
    (problem,) = answer.json()["problems"]
    assert problem["severity"] == "error" and problem["line"] == 4


def test_check_says_a_v1_file_can_be_converted(ui: WebUiStack) -> None:
    client, csrf = signed_in(ui, ui.member)
    body = client.post(
        "/editor/check", json={"specification": V1}, headers={"X-CSRF-Token": csrf}
    ).json()
    assert body["upgradable"] is True and body["valid"] is True


def test_check_without_the_csrf_token_is_refused(ui: WebUiStack) -> None:
    client, _ = signed_in(ui, ui.member)
    assert client.post("/editor/check", json={"specification": HELLO}).status_code == 403


def test_check_of_a_body_without_a_file_is_a_400_naming_the_field(ui: WebUiStack) -> None:
    client, csrf = signed_in(ui, ui.member)
    answer = client.post("/editor/check", json={"text": HELLO}, headers={"X-CSRF-Token": csrf})
    assert answer.status_code == 400
    assert answer.json()["message"].startswith("specification:")


def test_upgrade_converts_a_v1_file_to_v4_through_the_server(ui: WebUiStack) -> None:
    client, csrf = signed_in(ui, ui.member)
    answer = client.post(
        "/editor/upgrade", json={"specification": V1}, headers={"X-CSRF-Token": csrf}
    )
    text = answer.json()["specification"]
    assert text.startswith("version: v4\n")
    assert "/data:\n        volume: data" in text


def test_opening_a_v1_workflow_in_the_editor_converts_it(ui: WebUiStack) -> None:
    client, csrf = signed_in(ui, ui.member)
    workflow_id = start(client, csrf, V1, "from-v1")
    page = client.get(f"/editor?from={workflow_id}")
    assert "version: v4" in page.text and "version: v1" not in page.text
    assert "converted it to v4" in page.text
    assert 'value="from-v1"' in page.text


# -- a workflow's page ----------------------------------------------------------------------


def test_the_detail_page_shows_the_graph_with_image_and_dependency_edges(ui: WebUiStack) -> None:
    client, csrf = signed_in(ui, ui.member)
    workflow_id = start(client, csrf, KEEPS, "graph")
    # this stack holds no object cache: the build fails, and the jobs after it are skipped
    wait_for_status(ui, workflow_id, Status.FAILED)
    page = client.get(f"/workflows/{workflow_id}").text
    assert 'class="edge edge-image edge-on-success"' in page
    assert 'data-source="images.base" data-target="jobs.first"' in page
    assert 'data-source="jobs.first" data-target="jobs.second"' in page
    assert 'class="stage-box status-failed kind-image" data-stage="images.base"' in page
    assert 'class="stage-box status-canceled kind-job" data-stage="jobs.second"' in page


def test_the_stage_table_names_the_node_a_job_ran_on(ui: WebUiStack) -> None:
    client, csrf = signed_in(ui, ui.member)
    workflow_id = start(client, csrf, HELLO, "where")
    ui.stack.set_stage(workflow_id, "jobs.hello", Status.FINISHED)
    page = client.get(f"/workflows/{workflow_id}").text
    assert re.search(r'<td class="stage-nodes">node-[ab]</td>', page)
    assert re.search(r'<dd id="nodes-used">node-[ab]</dd>', page)


def wait_for_status(ui: WebUiStack, workflow_id: str, *statuses: str) -> None:
    deadline = time.monotonic() + 10
    while ui.stack.get_workflow(ui.admin_principal(), workflow_id).status not in statuses:
        assert time.monotonic() < deadline, f"workflow {workflow_id} never became {statuses}"
        time.sleep(0.05)


def stop_everything(ui: WebUiStack) -> None:
    """Stop every workflow still running, so that the nodes are empty."""
    for workflow in ui.stack.list_workflows(ui.admin_principal()):
        if workflow.status in (Status.PENDING, Status.STARTED):
            ui.stack.stop_workflow(ui.admin_principal(), workflow.id)
            wait_for_status(ui, workflow.id, Status.CANCELED, Status.FINISHED, Status.FAILED)


def test_a_pending_job_shows_why_it_waits_and_its_estimated_start(ui: WebUiStack) -> None:
    stop_everything(ui)
    client, csrf = signed_in(ui, ui.member)
    whole_node = HELLO.replace("cores: 1", "cores: 8").replace(
        "    resource:", "    policy:\n      timeout:\n        execute: 1h\n    resource:"
    )
    running = start(client, csrf, whole_node, "whole-node")
    ui.stack.set_stage(running, "jobs.hello", Status.STARTED)
    waiting = start(client, csrf, whole_node, "waits")
    deadline = time.monotonic() + 10
    while "Estimated start (backfill)" not in (page := client.get(f"/workflows/{waiting}").text):
        assert time.monotonic() < deadline, page
        time.sleep(0.1)
    stop_everything(ui)  # the module's later tests need the whole node this test filled
    assert re.search(r'<span class="why">[A-Z_]+: ', page)


def test_the_log_route_pages_the_output_and_ends_with_the_workflow(ui: WebUiStack) -> None:
    client, csrf = signed_in(ui, ui.member)
    workflow_id = start(client, csrf, HELLO, "logged")
    ui.stack.emit_logs(workflow_id, "jobs.hello", ["one\n", "two\n"])
    first = client.get(f"/workflows/{workflow_id}/log").json()
    assert [c["data"] for c in first["chunks"]] == ["one\n", "two\n"] and first["more"]
    ui.stack.set_stage(workflow_id, "jobs.hello", Status.FINISHED)
    after = first["chunks"][-1]["seq"]
    last = client.get(f"/workflows/{workflow_id}/log?after={after}").json()
    assert last == {"chunks": [], "more": False}


def test_a_bad_log_position_is_a_400_naming_it(ui: WebUiStack) -> None:
    client, csrf = signed_in(ui, ui.member)
    workflow_id = start(client, csrf, HELLO, "bad-after")
    answer = client.get(f"/workflows/{workflow_id}/log?after=-1")
    assert answer.status_code == 400 and "after:" in answer.text


def test_stop_cancels_the_workflow(ui: WebUiStack) -> None:
    client, csrf = signed_in(ui, ui.member)
    workflow_id = start(client, csrf, HELLO, "stopped")
    answer = client.post(f"/workflows/{workflow_id}/stop", data={"csrf": csrf})
    assert answer.status_code == 303
    wait_for_status(ui, workflow_id, Status.CANCELED)


def test_rerun_starts_the_same_file_under_the_same_name(ui: WebUiStack) -> None:
    client, csrf = signed_in(ui, ui.member)
    workflow_id = start(client, csrf, KEEPS, "nightly")
    answer = client.post(f"/workflows/{workflow_id}/rerun", data={"csrf": csrf})
    assert answer.status_code == 303
    rerun_id = answer.headers["location"].removeprefix("/workflows/")
    assert rerun_id != workflow_id
    rerun = ui.stack.get_workflow(ui.admin_principal(), rerun_id)
    assert rerun.name == "nightly"
    assert rerun.raw_specification == KEEPS


def test_another_users_workflow_is_not_found(ui: WebUiStack) -> None:
    admin, admin_csrf = signed_in(ui, ui.admin)
    workflow_id = start(admin, admin_csrf, HELLO, "the-admins")
    member, member_csrf = signed_in(ui, ui.member)
    assert member.get(f"/workflows/{workflow_id}").status_code == 404
    assert member.get(f"/workflows/{workflow_id}/log").status_code == 404
    assert member.get(f"/editor?from={workflow_id}").status_code == 404
    rerun = member.post(f"/workflows/{workflow_id}/rerun", data={"csrf": member_csrf})
    assert rerun.status_code == 404


def signed_in_reading_only(
    ui: WebUiStack, monkeypatch: pytest.MonkeyPatch
) -> tuple[httpx.Client, str]:
    """A client signed in as the administrator reading the cluster (READ_CLUSTER: every
    account's workflows) but administering nothing, and its CSRF token."""
    service = ui.stack.service
    authenticate = service.authenticate

    def reading_only(token: str) -> Principal:
        who = authenticate(token)
        if who.user_id != ui.admin.user_id:
            return who
        held = (who.permissions or frozenset()) - {Permission.ADMINISTER_CLUSTER}
        return dataclasses.replace(who, permissions=held)

    monkeypatch.setattr(service, "authenticate", reading_only)
    return signed_in(ui, ui.admin)


def test_a_cluster_reader_may_not_rerun_or_stop_another_accounts_workflow(
    ui: WebUiStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    member, member_csrf = signed_in(ui, ui.member)
    workflow_id = start(member, member_csrf, HELLO, "the-members")
    reader, reader_csrf = signed_in_reading_only(ui, monkeypatch)
    assert reader.get(f"/workflows/{workflow_id}").status_code == 200
    before = len(ui.stack.list_workflows_page(ui.admin_principal())[0])
    rerun = reader.post(f"/workflows/{workflow_id}/rerun", data={"csrf": reader_csrf})
    assert rerun.status_code == 403 and "administer_cluster" in rerun.text
    stop = reader.post(f"/workflows/{workflow_id}/stop", data={"csrf": reader_csrf})
    assert stop.status_code == 403 and "administer_cluster" in stop.text
    assert len(ui.stack.list_workflows_page(ui.admin_principal())[0]) == before
    assert ui.stack.get_workflow(ui.admin_principal(), workflow_id).status != Status.CANCELED


# -- who is offered Stop, Rerun and Start ----------------------------------------------------


@pytest.fixture(scope="module")
def monitoring(ui: WebUiStack) -> tuple[str, str]:
    """The cluster's monitoring service account (it holds nodes, it runs no workflows): its
    token and a STARTED workflow of its account, stored as a submission leaves it (the
    account could not submit it: a workflow from before run_workflows was required)."""
    account, token = ui.stack.service.identity.create_service_account("alerts", "monitoring")
    rows = add_workflows(ui.stack.service.sessions, account.account_id, 2, prefix="monitors")
    running = next(r for r in rows if r.status == Status.STARTED)
    return token, running.id


def signed_in_with_token(ui: WebUiStack, token: str) -> tuple[httpx.Client, str]:
    """A client whose session holds ``token`` (a service account has no password to sign in
    with), and its CSRF token."""
    return httpx.Client(base_url=ui.url, cookies={SESSION_COOKIE: token}), csrf_token(token)


def offered(page: str) -> set[str]:
    """Which of the workflow actions (``stop``, ``rerun``) a page offers a button for."""
    return set(re.findall(r'<button type="submit" id="(stop|rerun)"', page))


def test_the_owner_is_offered_stop_and_rerun(ui: WebUiStack) -> None:
    client, csrf = signed_in(ui, ui.member)
    workflow_id = start(client, csrf, HELLO, "owned")
    assert offered(client.get(f"/workflows/{workflow_id}").text) == {"stop", "rerun"}


def test_an_account_without_run_workflows_is_offered_neither_stop_nor_rerun(
    ui: WebUiStack, monitoring: tuple[str, str]
) -> None:
    token, workflow_id = monitoring
    client, _ = signed_in_with_token(ui, token)
    page = client.get(f"/workflows/{workflow_id}")
    assert page.status_code == 200
    assert offered(page.text) == set()
    assert offered(client.get(f"/workflows/{workflow_id}/live").text) == set()


def test_a_page_without_stop_and_rerun_still_shows_the_workflow_and_its_log_pane(
    ui: WebUiStack, monitoring: tuple[str, str]
) -> None:
    token, workflow_id = monitoring
    client, _ = signed_in_with_token(ui, token)
    page = client.get(f"/workflows/{workflow_id}").text
    assert 'id="workflow-status" class="status status-started">STARTED<' in page
    assert 'id="log-pane"' in page and f'href="/editor?from={workflow_id}"' in page
    assert client.get(f"/workflows/{workflow_id}/log").status_code == 200


def test_the_server_still_refuses_stop_and_rerun_to_an_account_without_run_workflows(
    ui: WebUiStack, monitoring: tuple[str, str]
) -> None:
    token, workflow_id = monitoring
    client, csrf = signed_in_with_token(ui, token)
    for action in ("stop", "rerun"):
        answer = client.post(f"/workflows/{workflow_id}/{action}", data={"csrf": csrf})
        assert answer.status_code == 403 and "run_workflows" in answer.text
    assert ui.stack.get_workflow(ui.admin_principal(), workflow_id).status == Status.STARTED


def test_a_cluster_reader_is_offered_neither_stop_nor_rerun_on_another_accounts_workflow(
    ui: WebUiStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    member, member_csrf = signed_in(ui, ui.member)
    workflow_id = start(member, member_csrf, HELLO, "read-by-the-reader")
    reader, _ = signed_in_reading_only(ui, monkeypatch)
    page = reader.get(f"/workflows/{workflow_id}")
    assert page.status_code == 200
    assert offered(page.text) == set()


def test_a_cluster_administrator_is_offered_stop_and_rerun_on_another_accounts_workflow(
    ui: WebUiStack,
) -> None:
    member, member_csrf = signed_in(ui, ui.member)
    workflow_id = start(member, member_csrf, HELLO, "administered")
    admin, _ = signed_in(ui, ui.admin)
    assert offered(admin.get(f"/workflows/{workflow_id}").text) == {"stop", "rerun"}


def test_the_editor_offers_no_start_to_an_account_without_run_workflows_saying_why(
    ui: WebUiStack, monitoring: tuple[str, str]
) -> None:
    client, _ = signed_in_with_token(ui, monitoring[0])
    page = client.get("/editor")
    assert page.status_code == 200
    assert 'id="start"' not in page.text
    assert "may not start workflows" in page.text and "run_workflows" in page.text


# -- the list -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def many(ui: WebUiStack) -> list:
    """120 workflows of the member's account, named ``paged-N``."""
    account = ui.stack.service.identity.login_principal(ui.member.user_id).account_id
    return add_workflows(ui.stack.service.sessions, account, 120, prefix="paged", start=1e9)


def test_the_list_starts_with_the_newest_submitted(ui: WebUiStack, many: list) -> None:
    client, _ = signed_in(ui, ui.member)
    page = client.get("/workflows?name=paged-").text
    assert names_listed(page)[:3] == ["paged-119", "paged-118", "paged-117"]
    assert 'aria-sort="descending"' in page


def test_the_list_pages_through_every_workflow_with_page_tokens(ui: WebUiStack, many: list) -> None:
    client, _ = signed_in(ui, ui.member)
    seen: list[str] = []
    url: str | None = "/workflows?name=paged-"
    while url is not None:
        page = client.get(url).text
        seen += names_listed(page)
        url = next_link(page)
    assert seen == [f"paged-{i}" for i in reversed(range(120))]


def test_the_started_column_sorts(ui: WebUiStack, many: list) -> None:
    client, _ = signed_in(ui, ui.member)
    page = client.get("/workflows?order=started&dir=asc&name=paged-").text
    never = {r.name for r in many if r.started_at is None}
    ordered = sorted(many, key=lambda r: (r.started_at or 0.0, r.id))
    assert names_listed(page) == [r.name for r in ordered[:50]]
    assert set(names_listed(page)[: len(never)]) == never


def test_the_status_filter_shows_one_status(ui: WebUiStack, many: list) -> None:
    client, _ = signed_in(ui, ui.member)
    page = client.get("/workflows?status=FAILED&name=paged-").text
    failed = [r.name for r in reversed(many) if r.status == Status.FAILED]
    assert names_listed(page) == failed


def test_a_page_token_of_another_order_is_refused(ui: WebUiStack, many: list) -> None:
    client, _ = signed_in(ui, ui.member)
    token = next_link(client.get("/workflows?name=paged-").text)
    assert token is not None
    answer = client.get(token.replace("name=paged-", "name=paged-1"))
    assert answer.status_code == 400
    assert "page: the token is for another order or filter" in answer.text


def test_a_forged_page_token_is_a_400(ui: WebUiStack) -> None:
    client, _ = signed_in(ui, ui.member)
    answer = client.get("/workflows?page=%%%not-base64")
    assert answer.status_code == 400 and "page:" in answer.text


def test_an_unknown_status_filter_is_a_400_naming_it(ui: WebUiStack) -> None:
    client, _ = signed_in(ui, ui.member)
    answer = client.get("/workflows?status=DONE")
    assert answer.status_code == 400 and "status: must be one of" in answer.text


def test_a_stage_name_that_is_not_printable_is_a_400(ui: WebUiStack) -> None:
    client, csrf = signed_in(ui, ui.member)
    workflow_id = start(client, csrf, HELLO, "nul-stage")
    answer = client.get(f"/workflows/{workflow_id}/log", params={"stage": "jobs.\x00"})
    assert answer.status_code == 400 and "stage: character 6 (U+0000)" in answer.text


def test_opening_an_id_that_cannot_be_one_is_not_found(ui: WebUiStack) -> None:
    client, _ = signed_in(ui, ui.member)
    assert client.get("/editor", params={"from": "x\x00y"}).status_code == 404
    assert client.get("/workflows/x%00y").status_code == 404


def test_a_name_filter_that_is_not_printable_is_a_400(ui: WebUiStack) -> None:
    client, _ = signed_in(ui, ui.member)
    answer = client.get("/workflows", params={"name": "a\x1b[2J"})
    assert answer.status_code == 400 and "name: character 2 (U+001B)" in answer.text


def test_a_task_arrays_progress_is_shown_with_its_stage(ui: WebUiStack) -> None:
    stop_everything(ui)  # its four tasks are placed only on free cores
    client, csrf = signed_in(ui, ui.member)
    array = HELLO.replace(
        "    resource:", "    task-array:\n      start: 1\n      end: 4\n    resource:"
    )
    workflow_id = start(client, csrf, array, "array")
    ui.stack.set_stage(workflow_id, "jobs.hello", Status.FINISHED, task_id=1)
    page = client.get(f"/workflows/{workflow_id}").text
    assert re.search(
        r'<span class="tasks">1 finished, 0 failed, \d running of 4 tasks</span>', page
    )


def test_a_stored_v1_file_that_no_longer_reads_opens_as_it_is_with_its_problems(
    ui: WebUiStack,
) -> None:
    client, csrf = signed_in(ui, ui.member)
    workflow_id = start(client, csrf, V1, "old-v1")
    with ui.stack.service.sessions.begin() as session:  # as if a rule came in since
        stored = session.get(Workflow, workflow_id)
        assert stored is not None
        stored.raw_specification = "version: v1\njobs:\n  hello: 3\n"
    page = client.get(f"/editor?from={workflow_id}")
    assert page.status_code == 200
    assert "version: v1\njobs:\n  hello: 3\n" in page.text
    assert "Line 3: jobs.hello: must be a mapping" in page.text
