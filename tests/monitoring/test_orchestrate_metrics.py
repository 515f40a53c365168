"""Orchestrate's own metrics (``GET /v4/metrics``) and the node discovery route, over REST."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable

import httpx
import pytest
from support.monitoring import Receiver
from support.openapi_routes import check_reply, openapi_of, undescribed

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.orchestrate.monitoring_routes import TEXT_FORMAT
from fuzzball_core.store.models import Run, Stage, Workflow


def _get(receiver: Receiver, path: str, token: str, **params: str) -> httpx.Response:
    return httpx.get(
        f"{receiver.orchestrate.rest_url}{path}",
        params=params,
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )


def test_every_node_has_attributed_failure_series_under_both_names_from_its_registration(
    make_receiver: Callable[..., Receiver],
) -> None:
    receiver = make_receiver()
    receiver.register("node-1")
    text = _get(receiver, "/v4/metrics", receiver.token).text
    for reason in ("node_lost", "evicted", "start_failed"):
        sample = (
            f'fuzzball_node_attributed_job_failures_total{{node="node-1",reason="{reason}"}} 0.0'
        )
        assert sample in text
        assert sample.replace("fuzzball_node_", "fuzzball_scheduler_node_") in text


def test_engine_and_scheduler_metrics_count_the_passes(
    make_receiver: Callable[..., Receiver],
) -> None:
    receiver = make_receiver()
    engine = receiver.orchestrate.orchestrate.engine
    receiver.orchestrate.call(engine.step)
    text = _get(receiver, "/v4/metrics", receiver.token).text
    counts = {
        line.split()[0]: float(line.split()[1])
        for line in text.splitlines()
        if line.startswith(("fuzzball_engine_pass_seconds_count", "fuzzball_scheduler_decision"))
    }
    assert counts["fuzzball_engine_pass_seconds_count"] >= 1
    assert counts["fuzzball_scheduler_decision_seconds_count"] >= 1
    assert "fuzzball_scheduler_queue_depth 0.0" in text


@pytest.mark.skipif(shutil.which("promtool") is None, reason="needs promtool (prometheus)")
def test_promtool_accepts_orchestrates_metrics(make_receiver: Callable[..., Receiver]) -> None:
    receiver = make_receiver()
    receiver.register("node-1")
    text = _get(receiver, "/v4/metrics", receiver.token).text
    result = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_metrics_need_scrape_node_metrics(make_receiver: Callable[..., Receiver]) -> None:
    receiver = make_receiver()
    service = receiver.orchestrate.service
    _, token = receiver.orchestrate.call(lambda: service.create_account("a-user"))
    reply = _get(receiver, "/v4/metrics", token)
    assert reply.status_code == 403 and "scrape_node_metrics" in reply.json()["message"]


def _registered(receiver: Receiver, name: str, metrics: str, exporter: str) -> str:
    node_id = receiver.register(name)
    monitoring = receiver.orchestrate.orchestrate.monitoring
    assert monitoring is not None
    monitoring.registered(
        node_id,
        node_pb2.RegisterRequest(
            name=name, metrics_address=metrics, node_exporter_address=exporter
        ),
    )
    return node_id


def test_sd_config_lists_each_nodes_two_endpoints_labelled_with_its_name(
    make_receiver: Callable[..., Receiver],
) -> None:
    receiver = make_receiver()
    node_id = _registered(receiver, "node-1", "10.0.0.1:9101", "10.0.0.1:9100")
    groups = _get(receiver, "/v4/nodes/-/sd_config", receiver.token).json()
    assert groups == [
        {
            "targets": [address],
            "labels": {"node": "node-1", "node_id": node_id, "pool": "static", "exporter": kind},
        }
        for kind, address in (("fuzzball", "10.0.0.1:9101"), ("node_exporter", "10.0.0.1:9100"))
    ]


def test_sd_config_in_proxy_mode_points_every_target_at_the_relay(
    make_receiver: Callable[..., Receiver],
) -> None:
    receiver = make_receiver()
    node_id = _registered(receiver, "node-1", "10.0.0.1:9101", "")
    [group] = _get(receiver, "/v4/nodes/-/sd_config", receiver.token, mode="proxy").json()
    assert group["targets"] == [receiver.orchestrate.config.orchestrate.rest_listen]
    assert group["labels"]["__metrics_path__"] == "/v4/metrics/node"
    assert group["labels"]["__param_node"] == node_id
    assert group["labels"]["__param_target"] == "fuzzball"


def test_sd_config_refuses_an_unknown_mode_by_name(make_receiver: Callable[..., Receiver]) -> None:
    receiver = make_receiver()
    reply = _get(receiver, "/v4/nodes/-/sd_config", receiver.token, mode="carrier-pigeon")
    assert reply.status_code == 400 and "mode" in reply.json()["message"]


SD_CONFIG = "GET /v4/nodes/-/sd_config"
CLIENT_CERTIFICATES = "POST /v3/monitoring/client-certificates"


def test_the_openapi_document_describes_the_json_monitoring_routes(
    make_receiver: Callable[..., Receiver],
) -> None:
    receiver = make_receiver()
    document = openapi_of(f"{receiver.orchestrate.rest_url}/v3", receiver.token)
    assert undescribed(document, {SD_CONFIG, CLIENT_CERTIFICATES}) == set()


def test_the_json_monitoring_routes_answer_as_the_openapi_document_says(
    make_receiver: Callable[..., Receiver],
) -> None:
    receiver = make_receiver()
    _registered(receiver, "node-1", "10.0.0.1:9101", "10.0.0.1:9100")
    document = openapi_of(f"{receiver.orchestrate.rest_url}/v3", receiver.token)
    for mode in ("direct", "proxy"):
        reply = _get(receiver, "/v4/nodes/-/sd_config", receiver.token, mode=mode)
        check_reply(document, SD_CONFIG, reply)
    service = receiver.orchestrate.service
    _, admin = receiver.orchestrate.call(lambda: service.create_account("ops", admin=True))
    issued = httpx.post(
        f"{receiver.orchestrate.rest_url}/v3/monitoring/client-certificates",
        json={"name": "site-am"},
        headers={"Authorization": f"Bearer {admin}"},
        timeout=30,
    )
    check_reply(document, CLIENT_CERTIFICATES, issued)


def test_the_proxy_answers_404_for_a_node_that_does_not_exist(
    make_receiver: Callable[..., Receiver],
) -> None:
    receiver = make_receiver()
    reply = _get(receiver, "/v4/metrics/node", receiver.token, node="no-such-node")
    assert reply.status_code == 404


def test_the_proxy_answers_503_for_a_node_that_is_not_connected(
    make_receiver: Callable[..., Receiver],
) -> None:
    receiver = make_receiver()
    receiver.register("node-1")  # scripted: no stream behind it
    reply = _get(receiver, "/v4/metrics/node", receiver.token, node="node-1")
    assert reply.status_code == 503 and "not connected" in reply.json()["message"]


def test_failures_are_attributed_to_nodes_by_reason_and_a_commands_own_exit_is_not(
    make_receiver: Callable[..., Receiver],
) -> None:
    receiver = make_receiver()
    node_id = receiver.register("node-1")
    sessions = receiver.orchestrate.orchestrate.engine.sessions
    admin = receiver.orchestrate.admin
    with sessions() as session:  # a finished workflow's records, as the engine leaves them
        session.add(
            Workflow(
                id="wf-1",
                account_id=admin.account_id,
                name="history",
                status="FAILED",
                raw_specification="",
                definition_v4="",
                created_at=0.0,
            )
        )
        session.flush()  # the workflow row before the stage that points to it
        stage = Stage(
            workflow_id="wf-1", name="jobs.work", kind="job", status="FAILED", created_at=0.0
        )
        session.add(stage)
        session.flush()
        for failure_cause, exit_code, message in (
            ("node", None, "node node-1 stopped responding"),
            ("node", None, "evicted from node node-1: bad DIMM"),
            (None, None, "the image could not be mounted"),
            (None, 1, "exited with 1"),
        ):
            session.add(
                Run(
                    workflow_id="wf-1",
                    stage_id=stage.id,
                    status="FAILED",
                    node_ids=[node_id],
                    failure_cause=failure_cause,
                    exit_code=exit_code,
                    message=message,
                    created_at=0.0,
                )
            )
        session.commit()
    text = _get(receiver, "/v4/metrics", receiver.token).text
    for reason in ("node_lost", "evicted", "start_failed"):
        assert (
            f'fuzzball_node_attributed_job_failures_total{{node="node-1",reason="{reason}"}} 1.0'
            in text
        )


def test_the_openapi_document_describes_the_metrics_routes(
    make_receiver: Callable[..., Receiver],
) -> None:
    receiver = make_receiver()
    document = openapi_of(f"{receiver.orchestrate.rest_url}/v3", receiver.token)
    assert undescribed(document, {"GET /v4/metrics", "GET /v4/metrics/node"}) == set()
    for path in ("/v4/metrics", "/v4/metrics/node"):
        reply = document["paths"][path]["get"]["responses"]["200"]
        assert reply["content"].keys() == {TEXT_FORMAT}, path
