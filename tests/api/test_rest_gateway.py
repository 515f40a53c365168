"""The REST gateway (/v3) over a live aiohttp server: shapes, auth, errors, log streams."""

from __future__ import annotations

import base64
import json
import threading
import time

import httpx
import pytest
from support.live_api import HELLO, Stack

from fuzzball_core import FUZZBALL_API_RELEASE
from fuzzball_core.service.views import FAILED, FINISHED, STARTED


def get(stack: Stack, path: str, token: str | None = "own", **kwargs) -> httpx.Response:
    return call(stack, "GET", path, token, **kwargs)


def call(
    stack: Stack, method: str, path: str, token: str | None = "own", **kwargs
) -> httpx.Response:
    bearer = stack.token if token == "own" else token
    headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
    return httpx.request(
        method, f"{stack.servers.rest_url}/v3{path}", headers=headers, timeout=10, **kwargs
    )


def assert_status_body(response: httpx.Response, http: int, code: int) -> dict:
    assert response.status_code == http
    body = response.json()
    assert body["code"] == code
    assert set(body) == {"code", "message", "details"}
    assert "Traceback" not in body["message"]
    return body


# -- authentication -------------------------------------------------------------------------

ALL_CALLS = [
    ("POST", "/workflows"),
    ("GET", "/workflows"),
    ("GET", "/workflows/some-id"),
    ("GET", "/workflows/some-id:status"),
    ("GET", "/workflows/some-id:log"),
    ("GET", "/workflows/some-id:events"),
    ("PATCH", "/workflows/some-id:stop"),
    ("POST", "/workflows:validate"),
    ("GET", "/workflows/some-id:why"),
    ("GET", "/nodes"),
    ("GET", "/nodes/some-id"),
    ("DELETE", "/nodes/some-id"),
    ("POST", "/nodes/some-id:uncordon"),
    ("GET", "/nodes/some-id:events"),
    ("GET", "/nodes/some-id/holds"),
    ("POST", "/nodes/some-id/holds"),
    ("DELETE", "/nodes/some-id/holds/1"),
]


@pytest.mark.parametrize(("method", "path"), ALL_CALLS)
def test_every_call_without_a_token_is_401_with_a_status_body(stack, method, path):
    body = assert_status_body(call(stack, method, path, token=None), 401, 16)
    assert "Authorization: Bearer" in body["message"]


@pytest.mark.parametrize(("method", "path"), ALL_CALLS)
def test_every_call_with_an_unknown_token_is_401(stack, method, path):
    assert_status_body(call(stack, method, path, token="not-a-token"), 401, 16)


def test_a_non_bearer_authorization_header_is_401(stack):
    response = httpx.get(
        f"{stack.servers.rest_url}/v3/workflows", headers={"Authorization": f"Basic {stack.token}"}
    )
    assert_status_body(response, 401, 16)


def test_version_answers_without_a_token_with_the_api_release_and_the_server_version(stack):
    response = httpx.get(f"{stack.servers.rest_url}/v3/version")
    assert response.status_code == 200
    assert response.json() == {
        "version": FUZZBALL_API_RELEASE,
        "serverVersion": stack.service.version(),
    }


def test_unknown_paths_are_404_even_without_a_token(stack):
    response = httpx.get(f"{stack.servers.rest_url}/v2/version")
    assert_status_body(response, 404, 5)


def test_a_wrong_method_is_405_with_a_status_body(stack):
    assert_status_body(call(stack, "DELETE", "/workflows"), 405, 12)


def test_a_405_names_the_methods_the_path_takes(stack):
    response = call(stack, "DELETE", "/workflows")
    assert set(response.headers["Allow"].replace(" ", "").split(",")) >= {"GET", "POST"}


@pytest.mark.parametrize("token", [None, "not-a-token"])
def test_a_401_asks_for_a_bearer_token(stack, token):
    response = call(stack, "GET", "/workflows", token=token)
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


# -- workflows ------------------------------------------------------------------------------


def test_start_with_raw_specification_stores_the_file_unchanged(stack):
    response = call(stack, "POST", "/workflows", json={"rawSpecification": HELLO, "name": "hi"})
    assert response.status_code == 200
    workflow_id = response.json()["id"]
    stored = get(stack, f"/workflows/{workflow_id}").json()
    assert stored["rawSpecification"] == HELLO
    assert stored["name"] == "hi"


def test_start_with_a_definition_object(stack):
    definition = {
        "version": "v1",
        "jobs": {
            "one": {
                "image": {"uri": "docker://alpine"},
                "command": ["true"],
                "resource": {"cpu": {"cores": 1}, "memory": {"size": "1GB"}},
            }
        },
    }
    response = call(stack, "POST", "/workflows", json={"definition": definition})
    assert response.status_code == 200
    stages = get(stack, f"/workflows/{response.json()['id']}").json()["jobs"]
    assert [s["name"] for s in stages if s["kind"] == "STAGE_KIND_JOB"] == ["jobs.one"]


def test_a_definition_keeps_the_order_its_jobs_were_sent_in(stack):
    names = ["zeta", "alpha", "mid", "beta", "omega", "delta"]
    job = {
        "image": {"uri": "docker://alpine"},
        "command": ["true"],
        "resource": {"cpu": {"cores": 1}, "memory": {"size": "1GB"}},
    }
    definition = {"version": "v1", "jobs": {name: job for name in names}}
    response = call(stack, "POST", "/workflows", json={"definition": definition})
    stored = get(stack, f"/workflows/{response.json()['id']}").json()["rawSpecification"]
    assert sorted(names, key=lambda name: stored.index(f"{name}:")) == names


def test_malformed_json_is_400_naming_the_problem(stack):
    response = call(stack, "POST", "/workflows", content=b'{"rawSpecification": ')
    body = assert_status_body(response, 400, 3)
    assert "invalid JSON" in body["message"]
    assert "line 1" in body["message"]


@pytest.mark.parametrize(
    ("payload", "words"),
    [
        ([1, 2], "expected a JSON object"),
        ({}, "definition or rawSpecification is required"),
        ({"rawSpecification": 5}, "rawSpecification: expected a string"),
        ({"definition": "x"}, "definition: expected an object"),
        ({"rawSpecification": HELLO, "definition": {}}, "not both"),
        ({"rawSpecification": HELLO, "colour": "red"}, "unknown field 'colour'"),
        ({"rawSpecification": HELLO, "name": 3}, "name: expected a string"),
    ],
)
def test_bad_start_bodies_are_400_naming_the_field(stack, payload, words):
    body = assert_status_body(call(stack, "POST", "/workflows", json=payload), 400, 3)
    assert words in body["message"]


def test_secrets_sent_with_a_start_are_refused_naming_the_field_never_their_values(stack):
    payload = {
        "rawSpecification": HELLO,
        "secretsMap": {"secrets": {"db": {"value": "hunter2-Qz"}}},
    }
    body = assert_status_body(call(stack, "POST", "/workflows", json=payload), 400, 3)
    assert body["message"].startswith("secretsMap: not supported")
    assert "hunter2-Qz" not in json.dumps(body)
    assert get(stack, "/workflows").json() == {"workflows": []}


@pytest.mark.parametrize("field", ["workflowId", "clusterId", "applicationId"])
def test_a_start_field_without_effect_here_is_accepted_with_a_warning_naming_it(stack, field):
    payload = {"rawSpecification": HELLO, field: "asked-for-7"}
    response = call(stack, "POST", "/workflows", json=payload)
    assert response.status_code == 200
    warnings = response.json()["warnings"]
    assert [w for w in warnings if w.startswith(f"{field}: has no effect here")] == warnings[:1]
    assert response.json()["id"] != "asked-for-7"


def test_a_start_field_without_effect_of_the_wrong_type_is_400_naming_it(stack):
    payload = {"rawSpecification": HELLO, "workflowId": 7}
    body = assert_status_body(call(stack, "POST", "/workflows", json=payload), 400, 3)
    assert body["message"] == "workflowId: expected a string"


def test_an_infinite_number_in_a_definition_is_400_naming_it(stack):
    body = b'{"definition": {"version": "v1", "x": Infinity}}'  # Python's JSON reads it
    refused = assert_status_body(call(stack, "POST", "/workflows", content=body), 400, 3)
    assert "definition: numbers must be finite" in refused["message"]


def test_an_invalid_workflow_is_400_with_field_paths(stack):
    broken = HELLO.replace("cores: 1", "cores: many")
    body = assert_status_body(
        call(stack, "POST", "/workflows", json={"rawSpecification": broken}), 400, 3
    )
    assert "jobs.hello" in body["message"]


def test_validate_returns_warnings_and_stores_nothing(stack):
    response = call(stack, "POST", "/workflows:validate", json={"rawSpecification": HELLO})
    assert response.status_code == 200
    assert response.json()["warnings"] == []
    assert get(stack, "/workflows").json() == {"workflows": []}


def test_validate_rejects_an_invalid_workflow(stack):
    response = call(stack, "POST", "/workflows:validate", json={"rawSpecification": "jobs: 3"})
    assert_status_body(response, 400, 3)


def test_list_shows_only_the_callers_workflows_newest_first(stack):
    first = stack.start(name="first")
    time.sleep(0.01)
    second = stack.start(name="second")
    listed = get(stack, "/workflows").json()["workflows"]
    assert [w["id"] for w in listed] == [second, first]
    assert get(stack, "/workflows", token=stack.other_token).json() == {"workflows": []}


def test_workflows_are_listed_a_page_at_a_time_newest_first(stack):
    started = []
    for name in ("one", "two", "three"):
        started.append(stack.start(name=name))
        time.sleep(0.01)
    first = get(stack, "/workflows", params={"pageSize": 2}).json()
    second = get(
        stack, "/workflows", params={"pageSize": 2, "pageToken": first["pageToken"]}
    ).json()
    assert [w["id"] for w in first["workflows"]] == started[:0:-1]
    assert [w["id"] for w in second["workflows"]] == started[:1]
    assert second["pageToken"] == ""


def test_a_workflow_started_between_pages_neither_repeats_nor_hides_one(stack):
    older, newer = stack.start(name="older"), stack.start(name="newer")
    first = get(stack, "/workflows", params={"pageSize": 1}).json()
    stack.start(name="meanwhile")
    second = get(stack, "/workflows", params={"pageSize": 1, "pageToken": first["pageToken"]})
    assert [w["id"] for w in first["workflows"] + second.json()["workflows"]] == [newer, older]


def _listed_ids(stack, params) -> list[str]:
    return [w["id"] for w in get(stack, "/workflows", params=params).json()["workflows"]]


def test_the_workflow_list_keeps_only_the_requested_statuses(stack):
    running = stack.start(name="running")
    stopped = stack.start(name="stopped")
    assert call(stack, "PATCH", f"/workflows/{stopped}:stop").status_code == 200
    assert _listed_ids(stack, {"requestedStatuses": "STAGE_STATUS_CANCELED"}) == [stopped]
    assert _listed_ids(stack, {"status": "STAGE_STATUS_STARTED"}) == [running]
    both = [
        ("requestedStatuses", "STAGE_STATUS_CANCELED"),
        ("requestedStatuses", "STAGE_STATUS_STARTED"),
    ]
    assert set(_listed_ids(stack, both)) == {running, stopped}
    assert _listed_ids(stack, {"requestedStatuses": "STAGE_STATUS_FAILED"}) == []


def test_a_workflow_status_filter_of_no_status_is_400_naming_it(stack):
    response = get(stack, "/workflows", params={"requestedStatuses": "DONE"})
    body = assert_status_body(response, 400, 3)
    assert body["message"].startswith("requestedStatuses: 'DONE' is not one of STAGE_STATUS_")


@pytest.mark.parametrize("parameter", ["filter", "orderBy", "scope", "aipFilter"])
def test_a_workflow_list_parameter_not_implemented_is_400_naming_it(stack, parameter):
    body = assert_status_body(get(stack, "/workflows", params={parameter: "x"}), 400, 3)
    assert body["message"].startswith(f"{parameter}: not supported")


@pytest.mark.parametrize("token", ["x", "W10=", "WzEsMl0="])  # not base64 JSON, [], [1,2]
def test_a_workflow_page_token_of_no_page_is_400_naming_it(stack, token):
    body = assert_status_body(get(stack, "/workflows", params={"pageToken": token}), 400, 3)
    assert body["message"].startswith("pageToken: ")


def test_get_workflow_has_swagger_fields(stack):
    workflow_id = stack.start()
    workflow = get(stack, f"/workflows/{workflow_id}").json()
    assert workflow["status"] == "STAGE_STATUS_STARTED"
    assert workflow["createTime"].endswith("Z")
    assert "T" in workflow["createTime"]
    job = next(s for s in workflow["jobs"] if s["name"] == "jobs.hello")
    assert job["status"] == "STAGE_STATUS_UNSPECIFIED"  # pending
    assert job["kind"] == "STAGE_KIND_JOB"
    assert workflow["totalJobs"] == 1


def test_another_accounts_workflow_is_not_found(stack):
    workflow_id = stack.start()
    body = assert_status_body(
        get(stack, f"/workflows/{workflow_id}", token=stack.other_token), 404, 5
    )
    assert workflow_id in body["message"]


def test_unknown_workflow_is_404(stack):
    for suffix in ("", ":status", ":events", ":log"):
        assert_status_body(get(stack, f"/workflows/nope{suffix}"), 404, 5)


def test_status_reports_the_workflow_and_its_stages(stack):
    workflow_id = stack.start()
    stack.service.set_stage(workflow_id, "jobs.hello", FAILED, exit_code=3)
    status = get(stack, f"/workflows/{workflow_id}:status").json()
    assert status["workflowStatus"] == "STAGE_STATUS_FAILED"
    assert "code 3" in status["error"]
    stage = next(s for s in status["status"]["stages"] if s["name"] == "jobs.hello")
    assert stage["status"] == "STAGE_STATUS_FAILED"
    assert stage["details"]["exitCode"] == 3
    assert stage["endTime"].endswith("Z")


def test_stop_cancels_and_a_second_stop_is_refused(stack):
    workflow_id = stack.start()
    response = call(stack, "PATCH", f"/workflows/{workflow_id}:stop")
    assert response.status_code == 200
    assert response.json() == {"id": workflow_id}
    status = get(stack, f"/workflows/{workflow_id}:status").json()
    assert status["workflowStatus"] == "STAGE_STATUS_CANCELED"
    assert_status_body(call(stack, "PATCH", f"/workflows/{workflow_id}:stop"), 400, 9)


def test_events_are_listed_and_resumed_after_a_sequence_number(stack):
    workflow_id = stack.start()
    stack.service.set_stage(workflow_id, "jobs.hello", STARTED)
    events = get(stack, f"/workflows/{workflow_id}:events").json()["events"]
    assert [e["kind"] for e in events][:1] == ["workflow_started"]
    assert events[-1]["stageName"] == "jobs.hello"
    later = get(
        stack, f"/workflows/{workflow_id}:events", params={"afterSeq": events[0]["seq"]}
    ).json()["events"]
    assert later == events[1:]


def test_a_non_integer_after_seq_is_400(stack):
    workflow_id = stack.start()
    body = assert_status_body(
        get(stack, f"/workflows/{workflow_id}:events", params={"afterSeq": "x"}), 400, 3
    )
    assert "afterSeq" in body["message"]


# -- logs -----------------------------------------------------------------------------------


def log_lines(response: httpx.Response) -> list[dict]:
    return [json.loads(line) for line in response.text.splitlines() if line.strip()]


def test_log_is_newline_delimited_results_with_base64_output(stack):
    workflow_id = stack.start()
    stack.service.emit_log(workflow_id, "jobs.hello", "hello\n")
    stack.service.emit_log(workflow_id, "jobs.hello", "oops\n", stream="stderr")
    lines = log_lines(get(stack, f"/workflows/{workflow_id}:log", params={"name": "hello"}))
    assert [base64.b64decode(line["result"]["output"]) for line in lines] == [b"hello\n", b"oops\n"]
    assert [line["result"]["stream"] for line in lines] == ["stdout", "stderr"]


@pytest.mark.parametrize(
    ("route", "params", "words"),
    [
        (":log", {"rank": "3"}, "rank: not supported"),
        (":log", {"command": "EXEC"}, "command: not supported"),
        (":log", {"show.tail": "-5"}, "show.tail: expected 0 or more"),
        (":log", {"tial": "5"}, "tial: not a parameter of this route"),
        (":status", {"force": "maybe"}, "force: expected true or false"),
        (":status", {"verbose": "true"}, "verbose: not a parameter of this route"),
        (":events", {"after": "3"}, "after: not a parameter of this route"),
        ("", {"view": "full"}, "view: not a parameter of this route (it takes none)"),
    ],
)
def test_a_workflow_route_parameter_it_does_not_take_is_400_naming_it(stack, route, params, words):
    workflow_id = stack.start()
    response = get(stack, f"/workflows/{workflow_id}{route}", params=params)
    assert words in assert_status_body(response, 400, 3)["message"]


def test_stop_takes_force_and_still_cancels(stack):
    workflow_id = stack.start()
    response = call(stack, "PATCH", f"/workflows/{workflow_id}:stop", params={"force": "true"})
    assert response.status_code == 200, response.text
    status = get(stack, f"/workflows/{workflow_id}:status", params={"force": "true"}).json()
    assert status["workflowStatus"] == "STAGE_STATUS_CANCELED"


def test_a_tail_of_minus_one_is_the_whole_log(stack):
    workflow_id = stack.start()
    for text in ("a\n", "b\n"):
        stack.service.emit_log(workflow_id, "jobs.hello", text)
    response = get(stack, f"/workflows/{workflow_id}:log", params={"show.tail": "-1"})
    assert len(log_lines(response)) == 2


def test_log_tail_keeps_the_last_chunks(stack):
    workflow_id = stack.start()
    for n in range(5):
        stack.service.emit_log(workflow_id, "jobs.hello", f"{n}\n")
    lines = log_lines(
        get(stack, f"/workflows/{workflow_id}:log", params={"name": "hello", "show.tail": "2"})
    )
    assert [base64.b64decode(x["result"]["output"]) for x in lines] == [b"3\n", b"4\n"]


def test_log_of_an_unknown_job_is_404_naming_it(stack):
    workflow_id = stack.start()
    body = assert_status_body(
        get(stack, f"/workflows/{workflow_id}:log", params={"name": "nosuch"}), 404, 5
    )
    assert "nosuch" in body["message"]


def test_log_follow_must_be_a_boolean(stack):
    workflow_id = stack.start()
    body = assert_status_body(
        get(stack, f"/workflows/{workflow_id}:log", params={"show.follow": "maybe"}), 400, 3
    )
    assert "show.follow" in body["message"]


def test_followed_log_streams_new_output_until_the_workflow_ends(stack):
    workflow_id = stack.start()
    stack.service.emit_log(workflow_id, "jobs.hello", "first\n")

    def finish_later() -> None:
        time.sleep(0.3)
        stack.service.emit_log(workflow_id, "jobs.hello", "second\n")
        stack.service.set_stage(workflow_id, "jobs.hello", FINISHED, exit_code=0)

    writer = threading.Thread(target=finish_later)
    writer.start()
    received = []
    url = f"{stack.servers.rest_url}/v3/workflows/{workflow_id}:log"
    with httpx.stream(
        "GET",
        url,
        params={"name": "hello", "show.follow": "true"},
        headers={"Authorization": f"Bearer {stack.token}"},
        timeout=10,
    ) as reply:
        assert reply.status_code == 200
        for line in reply.iter_lines():
            received.append(base64.b64decode(json.loads(line)["result"]["output"]))
    writer.join()
    assert received == [b"first\n", b"second\n"]


# -- nodes ----------------------------------------------------------------------------------


def cluster_admin(stack: Stack) -> str:
    """A token of an admin service account: nodes are an administrator's to see."""
    return stack.service.create_account("root", admin=True)[1]


def test_nodes_are_listed_with_capacity(stack):
    node = stack.service.add_node(
        "n2", 4, 8 * 1024**3, devices={"nvidia.com/gpu": 2}, annotations={"rack": "a"}
    )
    listed = {n["hostName"]: n for n in get(stack, "/nodes", cluster_admin(stack)).json()["nodes"]}
    assert sorted(listed) == ["n2", "node-1"]
    assert (listed["n2"]["id"], listed["n2"]["cores"], listed["n2"]["memoryGb"]) == (node.id, 4, 8)
    assert listed["n2"]["devices"] == 2
    assert listed["n2"]["resource"]["annotations"] == {"rack": "a"}


def test_a_node_is_shown_by_id_or_name_with_its_running_jobs(stack):
    workflow_id = stack.start()
    stack.service.set_stage(workflow_id, "jobs.hello", STARTED)
    admin = cluster_admin(stack)
    shown = get(stack, "/nodes/node-1", admin).json()
    assert shown == get(stack, f"/nodes/{shown['id']}", admin).json()
    assert shown["hostName"] == "node-1"
    assert shown["resourceSummary"]["allocatedCores"] == 1
    assert shown["resourceSummary"]["availableCores"] == 7
    assert len(shown["runningJobs"]) == 1


def test_unknown_node_is_404(stack):
    assert_status_body(get(stack, "/nodes/ghost", cluster_admin(stack)), 404, 5)


def test_a_user_listing_nodes_is_403_naming_the_permission(stack):
    body = assert_status_body(get(stack, "/nodes"), 403, 7)
    assert "read_nodes" in body["message"]
