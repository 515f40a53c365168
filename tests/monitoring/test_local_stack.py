"""The monitoring stack of ``fuzzball local up``: its configuration keys, and Prometheus and
Alertmanager started, shown and stopped as the deployment's own processes are."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cluster import free_port
from support.monitoring import have_stack, wait_until

from fuzzball_core.cli import monitoring_stack
from fuzzball_core.config import FuzzballConfig, parse_config


def test_up_gives_orchestrate_a_receiver_and_makes_the_ca_first(tmp_path: Path) -> None:
    document: dict = {}
    monitoring_stack.prepare(document, tmp_path)
    assert document["monitoring"]["webhook-listen"] == "127.0.0.1:9443"
    assert (Path(document["monitoring"]["ca-dir"]) / "ca.crt").exists()
    # one node: the 20% default would let monitoring hold none of it
    assert document["node-health"]["max-monitoring-held-percent"] == 100


def test_what_the_user_set_stays(tmp_path: Path) -> None:
    document = {
        "monitoring": {"webhook-listen": "127.0.0.1:19443"},
        "node-health": {"max-monitoring-held-percent": 50},
    }
    monitoring_stack.prepare(document, tmp_path)
    assert document["monitoring"]["webhook-listen"] == "127.0.0.1:19443"
    assert document["node-health"]["max-monitoring-held-percent"] == 50


def test_no_monitoring_turns_the_stack_off(tmp_path: Path) -> None:
    document: dict = {}
    monitoring_stack.prepare(document, tmp_path, enabled=False)
    config = parse_config(document)
    assert config.monitoring.enabled is False
    assert monitoring_stack.start(config, tmp_path, "http://127.0.0.1:1") == {"enabled": False}
    assert monitoring_stack.status(config, tmp_path) == {}


def test_no_monitoring_starts_no_node_exporter_unless_the_user_placed_one(tmp_path: Path) -> None:
    plain: dict = {}
    placed: dict = {"substrate": {"node-exporter-listen": "127.0.0.1:9100"}}
    monitoring_stack.prepare(plain, tmp_path, enabled=False)
    monitoring_stack.prepare(placed, tmp_path, enabled=False)
    assert parse_config(plain).node_exporter_listen == ""
    assert parse_config(placed).node_exporter_listen == "127.0.0.1:9100"


@pytest.fixture
def deployment(tmp_path: Path) -> Iterator[tuple[FuzzballConfig, Path]]:
    reason = have_stack()
    if reason:
        pytest.skip(reason)
    directory = tmp_path / "local"
    directory.mkdir()
    document: dict = {
        "data-dir": str(tmp_path / "data"),
        "monitoring": {
            "webhook-listen": f"127.0.0.1:{free_port()}",
            "prometheus-listen": f"127.0.0.1:{free_port()}",
            "alertmanager-listen": f"127.0.0.1:{free_port()}",
        },
    }
    monitoring_stack.prepare(document, directory)
    config = parse_config(document)
    yield config, directory
    monitoring_stack.stop(config, directory)


def test_up_starts_prometheus_and_alertmanager_and_status_shows_them_ready(
    deployment: tuple[FuzzballConfig, Path],
) -> None:
    config, directory = deployment
    started = monitoring_stack.start(config, directory, "http://127.0.0.1:1")
    assert started["prometheus"] == f"http://{config.monitoring.prometheus_listen}"

    def ready() -> dict | None:
        report = monitoring_stack.status(config, directory)
        return report if all(p["ready"] for p in report.values()) else None

    report = wait_until("the stack to be ready", ready, timeout=60)
    assert set(report) == {"prometheus", "alertmanager"}
    assert all(p["running"] and p["pid"] for p in report.values())


def test_a_second_up_reuses_the_running_stack(deployment: tuple[FuzzballConfig, Path]) -> None:
    config, directory = deployment
    monitoring_stack.start(config, directory, "http://127.0.0.1:1")
    first = {n: p["pid"] for n, p in monitoring_stack.status(config, directory).items()}
    monitoring_stack.start(config, directory, "http://127.0.0.1:1")
    again = {n: p["pid"] for n, p in monitoring_stack.status(config, directory).items()}
    assert first == again and all(first.values())


def test_down_stops_the_stack(deployment: tuple[FuzzballConfig, Path]) -> None:
    config, directory = deployment
    monitoring_stack.start(config, directory, "http://127.0.0.1:1")
    assert sorted(monitoring_stack.stop(config, directory)) == ["alertmanager", "prometheus"]
    report = monitoring_stack.status(config, directory)
    assert not any(p["running"] for p in report.values())
