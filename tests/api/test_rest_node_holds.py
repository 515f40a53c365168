"""Node holds, node removal and workflow explanations over the live REST gateway (/v3)."""

from __future__ import annotations

import time

import pytest
from support.live_api import HELLO, Stack
from support.sql_stack import ADMIN
from test_rest_gateway import assert_status_body, call, get

from fuzzball_core.service.audit import AuditQuery
from fuzzball_core.service.views import FINISHED, STARTED
from fuzzball_core.vocabulary import AuditAction


@pytest.fixture
def admin_token(stack: Stack) -> str:
    _, token = stack.service.create_account("admin", admin=True)
    return token


def place(stack: Stack, token: str, effect: str = "cordon", reason: str = "maintenance"):
    return call(
        stack, "POST", "/nodes/node-1/holds", token, json={"effect": effect, "reason": reason}
    )


def wait_for_reason(stack: Stack, workflow_id: str, stage: str = "jobs.hello") -> None:
    """Until the scheduler has given its verdict on the stage (after its first pass)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        explained = {e.stage_name: e for e in stack.service.explain_workflow(ADMIN, workflow_id)}
        if stage in explained and explained[stage].reason != "WAITING":
            return
        time.sleep(0.02)
    raise AssertionError(f"{stage} never got a scheduling verdict")


# -- placing and listing holds --------------------------------------------------------------


def test_an_admin_places_a_hold_and_gets_it_back_in_camel_case(stack, admin_token):
    response = place(stack, admin_token)
    assert response.status_code == 200
    hold = response.json()
    assert set(hold) == {"id", "effect", "source", "reason", "placedBy", "placeTime"}
    assert (hold["effect"], hold["source"], hold["reason"], hold["placedBy"]) == (
        "cordon",
        "admin",
        "maintenance",
        "admin",
    )
    assert hold["placeTime"].endswith("Z")
    assert isinstance(hold["id"], str)


def test_holds_are_listed_oldest_first(stack, admin_token):
    first = place(stack, admin_token, "cordon").json()
    second = place(stack, admin_token, "deprovision").json()
    listed = get(stack, "/nodes/node-1/holds", admin_token).json()["holds"]
    assert [h["id"] for h in listed] == [first["id"], second["id"]]


def test_node_json_carries_its_holds_in_list_and_show(stack, admin_token):
    hold = place(stack, admin_token).json()
    (listed,) = get(stack, "/nodes", admin_token).json()["nodes"]
    assert listed["holds"] == [hold]
    assert get(stack, "/nodes/node-1", admin_token).json()["holds"] == [hold]
    assert listed["status"] == "READY"  # a hold sits beside the status, never replaces it


def test_a_non_admin_placing_a_hold_is_403_permission_denied(stack):
    body = assert_status_body(place(stack, stack.token), 403, 7)
    assert "alice" in body["message"]
    assert stack.service.list_holds(ADMIN, "node-1") == []


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("DELETE", "/nodes/node-1/holds/1"),
        ("POST", "/nodes/node-1:uncordon"),
        ("DELETE", "/nodes/node-1"),
    ],
)
def test_a_non_admin_releasing_or_removing_is_403(stack, method, path):
    assert_status_body(call(stack, method, path), 403, 7)


def test_the_monitoring_account_places_holds_as_monitoring(stack):
    _, monitoring = stack.service.create_account("monitoring", kind="monitoring")
    assert place(stack, monitoring).json()["source"] == "monitoring"


@pytest.mark.parametrize(
    ("payload", "words"),
    [
        ({}, "effect: required"),
        ({"effect": "drain"}, "effect: expected one of cordon, evict, deprovision"),
        ({"effect": 3}, "effect: expected a string"),
        ({"effect": "cordon", "reason": 5}, "reason: expected a string"),
        ({"effect": "cordon", "until": "tomorrow"}, "unknown field 'until'"),
    ],
)
def test_bad_hold_bodies_are_400_naming_the_field(stack, admin_token, payload, words):
    response = call(stack, "POST", "/nodes/node-1/holds", admin_token, json=payload)
    assert words in assert_status_body(response, 400, 3)["message"]


def test_a_hold_on_an_unknown_node_is_404(stack, admin_token):
    response = call(stack, "POST", "/nodes/ghost/holds", admin_token, json={"effect": "cordon"})
    assert_status_body(response, 404, 5)


# -- releasing ------------------------------------------------------------------------------


def test_releasing_a_hold_by_id_removes_it(stack, admin_token):
    hold = place(stack, admin_token).json()
    response = call(stack, "DELETE", f"/nodes/node-1/holds/{hold['id']}", admin_token)
    assert (response.status_code, response.json()) == (200, {})
    assert get(stack, "/nodes/node-1/holds", admin_token).json()["holds"] == []


def test_releasing_an_unknown_hold_is_404(stack, admin_token):
    assert_status_body(call(stack, "DELETE", "/nodes/node-1/holds/99", admin_token), 404, 5)


def test_a_non_integer_hold_id_is_400(stack, admin_token):
    response = call(stack, "DELETE", "/nodes/node-1/holds/first", admin_token)
    assert "holdId" in assert_status_body(response, 400, 3)["message"]


def test_uncordon_releases_admin_cordons_and_lists_what_stays(stack, admin_token):
    _, monitoring = stack.service.create_account("monitoring", kind="monitoring")
    place(stack, admin_token, "cordon")
    kept = place(stack, monitoring, "cordon", "ECC errors").json()
    response = call(stack, "POST", "/nodes/node-1:uncordon", admin_token)
    assert response.status_code == 200
    assert response.json() == {"released": 1, "holds": [kept]}


# -- removing -------------------------------------------------------------------------------


def test_removing_a_node_that_is_up_is_refused(stack, admin_token):
    body = assert_status_body(call(stack, "DELETE", "/nodes/node-1", admin_token), 400, 9)
    assert "still up" in body["message"]


def test_removing_an_offline_node_forgets_it_and_its_holds(stack, admin_token):
    stack.service.add_node("old", 2, 1024**3, lease_seconds=0.1)
    stack.service.wait_for_node_status("old", "OFFLINE")
    call(stack, "POST", "/nodes/old/holds", admin_token, json={"effect": "cordon"})
    response = call(stack, "DELETE", "/nodes/old", admin_token)
    assert (response.status_code, response.json()) == (200, {})
    assert [n["hostName"] for n in get(stack, "/nodes", admin_token).json()["nodes"]] == ["node-1"]


# -- why ------------------------------------------------------------------------------------


def test_why_explains_a_job_held_back_by_a_cordon(stack, admin_token):
    place(stack, admin_token)
    workflow_id = stack.start()
    wait_for_reason(stack, workflow_id)
    response = get(stack, f"/workflows/{workflow_id}:why")
    assert response.status_code == 200
    (stage,) = response.json()["stages"]
    assert stage["stageName"] == "jobs.hello"
    assert stage["kind"] == "STAGE_KIND_JOB"
    assert stage["status"] == "STAGE_STATUS_UNSPECIFIED"
    assert stage["reason"] == "INSUFFICIENT_RESOURCES"
    assert "held (cordon by admin)" in stage["message"]


def test_why_leaves_out_finished_stages_unless_all_is_true(stack):
    workflow_id = stack.start()
    stack.service.set_stage(workflow_id, "jobs.hello", FINISHED)
    assert get(stack, f"/workflows/{workflow_id}:why").json()["stages"] == []
    (stage,) = get(stack, f"/workflows/{workflow_id}:why", params={"all": "true"}).json()["stages"]
    assert (stage["stageName"], stage["reason"]) == ("jobs.hello", "FINISHED")


def test_why_of_a_running_job_says_it_runs(stack):
    workflow_id = stack.start()
    stack.service.set_stage(workflow_id, "jobs.hello", STARTED)
    (stage,) = get(stack, f"/workflows/{workflow_id}:why").json()["stages"]
    assert (stage["status"], stage["reason"]) == ("STAGE_STATUS_STARTED", "RUNNING")


def test_why_of_another_accounts_workflow_is_404(stack):
    workflow_id = stack.start(HELLO)
    assert_status_body(get(stack, f"/workflows/{workflow_id}:why", stack.other_token), 404, 5)


def test_a_holds_placing_and_release_are_audited_alike_with_the_callers_address(stack, admin_token):
    hold = place(stack, admin_token).json()
    node_id = stack.service.get_node(ADMIN, "node-1").id
    call(stack, "DELETE", f"/nodes/{node_id}/holds/{hold['id']}", admin_token)

    audit = stack.service.service.audit
    placed = audit.query(AuditQuery(action=AuditAction.HOLD_ADDED)).entries[0]
    released = audit.query(AuditQuery(action=AuditAction.HOLD_RELEASED)).entries[0]
    # placed by the node's name, released by its id: one target
    assert placed.target == released.target == f"node node-1 ({node_id})"
    assert placed.source == released.source == "127.0.0.1"
