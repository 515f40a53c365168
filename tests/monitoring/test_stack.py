"""The bundled stack for real: Prometheus and Alertmanager (Debian's packages) started by the
test on loopback with 1 s intervals, scraping real Substrate agents found through
``/v4/nodes/-/sd_config``, with the shipped rules and routes, holding nodes through
Orchestrate's mTLS receiver."""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from support.cluster import LocalRegistry, have_prerequisites
from support.monitoring import (
    MonitoredCluster,
    MonitoringStack,
    Receiver,
    alert,
    client_certificate,
    have_stack,
    notification,
    stack_settings,
    wait_until,
    webhook_client,
    write_edac,
    write_samples,
)

pytestmark = [pytest.mark.root, pytest.mark.slow]
missing = have_stack() or have_prerequisites()
if missing:
    pytest.skip(missing, allow_module_level=True)


@pytest.fixture(scope="module")
def monitored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MonitoredCluster]:
    """Two agents (both may be held: a ceiling of 100%) watched by the stack."""
    registry = LocalRegistry(tmp_path_factory.mktemp("registry"))
    try:
        cluster = MonitoredCluster(
            tmp_path_factory.mktemp("monitored"),
            registry.url,
            settings={"node-health": {"max-monitoring-held-percent": 100}},
        )
        try:
            yield cluster
        finally:
            cluster.close()
    finally:
        registry.stop()


@pytest.fixture
def released(monitored: MonitoredCluster) -> Iterator[None]:
    """Every hold on the agents' nodes is released after the test."""
    yield
    engine = monitored.orchestrate.orchestrate.engine
    for index in range(len(monitored.agents)):
        name = f"node-{index + 1}"
        monitored.orchestrate.call(lambda n=name: engine.release_holds(n, released_by="test"))


def _scraped_value(monitored: MonitoredCluster, expression: str) -> float | None:
    assert monitored.stack is not None
    result = monitored.stack.query(expression)
    return float(result[0]["value"][1]) if result else None


def _monitoring_holds(monitored: MonitoredCluster, node: str, alertname: str) -> list:
    return [
        h
        for h in monitored.holds(node)
        if h.source == "monitoring" and h.reason.startswith(alertname)
    ]


def test_a_raised_memory_error_counter_cordons_the_node_and_uncordon_leaves_it(
    monitored: MonitoredCluster, released: None
) -> None:
    node_id = monitored.node_id("node-1")
    write_edac(monitored.metrics_dir, node_id, uncorrected=0)
    series = 'fuzzball_node_memory_errors_total{node="node-1",type="uncorrected"}'
    wait_until(
        "Prometheus to scrape the counter at 0", lambda: _scraped_value(monitored, series) == 0
    )

    write_edac(monitored.metrics_dir, node_id, uncorrected=1)
    # within the rule's for (0 s) plus scrape, evaluation and grouping intervals (1 s each)
    [hold] = wait_until(
        "a monitoring cordon on node-1",
        lambda: _monitoring_holds(monitored, "node-1", "FuzzballNodeMemoryErrors"),
        timeout=60,
    )
    assert hold.effect == "cordon"
    assert monitored.stack is not None and monitored.stack.firing("FuzzballNodeMemoryErrors")

    service, admin = monitored.orchestrate.service, monitored.orchestrate.admin
    monitored.orchestrate.call(lambda: service.uncordon(admin, "node-1"))
    assert _monitoring_holds(monitored, "node-1", "FuzzballNodeMemoryErrors") == [hold]


def test_an_alert_resolved_in_alertmanager_with_fb_release_releases_its_hold(
    monitored: MonitoredCluster, released: None
) -> None:
    assert monitored.stack is not None
    labels = {
        "alertname": "SiteRackOverheating",
        "node": "node-2",
        "fb_action": "cordon",
        "fb_release": "true",
    }
    now = datetime.datetime.now(datetime.UTC)
    monitored.stack.post_alerts([{"labels": labels, "startsAt": now.isoformat()}])
    wait_until(
        "the site rule's cordon",
        lambda: _monitoring_holds(monitored, "node-2", "SiteRackOverheating"),
    )
    ended = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=1)
    monitored.stack.post_alerts(
        [{"labels": labels, "startsAt": now.isoformat(), "endsAt": ended.isoformat()}]
    )
    wait_until(
        "the resolved alert to release its hold",
        lambda: not _monitoring_holds(monitored, "node-2", "SiteRackOverheating"),
    )


def _job_events(monitored: MonitoredCluster, workflow_id: str) -> list:
    return [e for e in monitored.orchestrate.events(workflow_id) if e.stage_name == "jobs.work"]


def test_a_gpu_ecc_evict_requeues_a_job_retried_on_node_onto_the_other_node(
    monitored: MonitoredCluster, released: None
) -> None:
    orchestrate = monitored.orchestrate
    workflow_id = orchestrate.start_workflow(
        "version: v1\njobs:\n  work:\n    image: {uri: docker://alpine:latest}\n"
        "    command: [/bin/sh, -c, 'sleep 30; echo done']\n"
        "    policy: {retry: {on: [node]}}\n",
        name="evicted",
    )
    view = orchestrate.wait_for(
        workflow_id,
        lambda w: any(s.name == "jobs.work" and s.status == "STARTED" for s in w.stages),
    )
    (first_id,) = next(s for s in view.stages if s.name == "jobs.work").node_ids
    first = next(n.name for n in orchestrate.nodes() if n.id == first_id)
    series = 'fuzzball_node_gpu_ecc_errors_total{gpu="0",type="uncorrected"}'
    write_samples(monitored.metrics_dir, first_id, {series: 0})
    query = f'fuzzball_node_gpu_ecc_errors_total{{node="{first}",type="uncorrected"}}'
    wait_until(
        "Prometheus to scrape the ECC counter", lambda: _scraped_value(monitored, query) == 0
    )
    write_samples(monitored.metrics_dir, first_id, {series: 2})

    finished = orchestrate.wait_for(workflow_id, timeout=120)
    write_samples(monitored.metrics_dir, first_id, {})
    assert finished.status == "FINISHED", finished
    kinds = [e.kind for e in _job_events(monitored, workflow_id)]
    assert "evicted" in kinds and kinds.count("retried") == 1
    [hold] = _monitoring_holds(monitored, first, "FuzzballNodeGPUUncorrectableECC")
    assert hold.effect == "evict"
    exits = [e.node_id for e in _job_events(monitored, workflow_id) if e.kind == "container_exited"]
    assert exits[-1] != first_id
    metrics = httpx.get(
        f"{orchestrate.rest_url}/v4/metrics",
        headers={"Authorization": f"Bearer {monitored.token}"},
        timeout=10,
    ).text
    evicted = f'fuzzball_node_attributed_job_failures_total{{node="{first}",reason="evicted"}} 1.0'
    assert evicted in metrics
    assert evicted.replace("fuzzball_node_", "fuzzball_scheduler_node_") in metrics


def test_http_sd_lists_a_node_added_while_prometheus_runs_and_prometheus_scrapes_it(
    monitored: MonitoredCluster,
) -> None:
    assert monitored.scraped("node-1")
    name = monitored.add_agent()
    monitored.wait_for_nodes(len(monitored.agents))
    wait_until(f"Prometheus to scrape {name}", lambda: monitored.scraped(name), timeout=60)


def test_the_scrape_proxy_relays_a_nodes_metrics_over_its_stream(
    monitored: MonitoredCluster,
) -> None:
    reply = httpx.get(
        f"{monitored.orchestrate.rest_url}/v4/metrics/node",
        params={"node": monitored.node_id("node-1")},
        headers={"Authorization": f"Bearer {monitored.token}"},
        timeout=15,
    )
    assert reply.status_code == 200, reply.text
    assert "fuzzball_node_connected 1.0" in reply.text


def test_the_scrape_proxy_refuses_a_caller_without_scrape_node_metrics(
    monitored: MonitoredCluster,
) -> None:
    service = monitored.orchestrate.service
    _, token = monitored.orchestrate.call(lambda: service.create_account("a-user"))
    reply = httpx.get(
        f"{monitored.orchestrate.rest_url}/v4/metrics/node",
        params={"node": monitored.node_id("node-1")},
        headers={"Authorization": f"Bearer {token}"},
        timeout=15,
    )
    assert reply.status_code == 403
    assert "scrape_node_metrics" in reply.json()["message"]


def test_the_ceiling_alert_fires_once_a_second_hold_of_five_nodes_is_refused(
    make_receiver: Callable[..., Receiver], tmp_path: Path
) -> None:
    receiver = make_receiver()  # the default ceiling: 20% of five nodes is one
    for index in range(1, 6):
        receiver.register(f"node-{index}")
    stack = MonitoringStack(
        stack_settings(
            tmp_path / "stack",
            receiver.orchestrate.rest_url,
            receiver.token,
            receiver.webhook,
            receiver.ca_dir,
        )
    )
    try:
        cert = client_certificate(receiver.ca_dir, tmp_path, "alertmanager-test")
        with webhook_client(receiver.ca_dir / "ca.crt", cert) as client:
            outcomes = client.post(
                receiver.url,
                json=notification(
                    alert("FuzzballNodeMemoryErrors", "node-1"),
                    alert("FuzzballNodeMemoryErrors", "node-2"),
                ),
            ).json()["alerts"]
        assert [o["result"] for o in outcomes] == ["placed", "refused"]
        [firing] = wait_until(
            "FuzzballNodeHoldCeilingReached to fire",
            lambda: stack.firing("FuzzballNodeHoldCeilingReached"),
        )
        assert firing["labels"]["pool"] == "static"
    finally:
        stack.close()


def test_prometheus_in_proxy_mode_scrapes_nodes_through_orchestrates_relay(
    monitored: MonitoredCluster, tmp_path: Path
) -> None:
    stack = MonitoringStack(
        stack_settings(
            tmp_path / "proxy-stack",
            monitored.orchestrate.rest_url,
            monitored.token,
            monitored.webhook,
            monitored.ca_dir,
            mode="proxy",
        )
    )
    try:

        def relayed() -> list:
            return [
                t
                for t in stack.targets()
                if t["labels"].get("node") == "node-1"
                and t["health"] == "up"
                and t["scrapeUrl"].startswith(monitored.orchestrate.rest_url + "/v4/metrics/node")
            ]

        wait_until("Prometheus to scrape node-1 through the relay", relayed, timeout=60)
        series = stack.query('fuzzball_node_connected{node="node-1"}')
        assert series and series[0]["value"][1] == "1"
    finally:
        stack.close()
