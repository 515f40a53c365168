"""Orchestrate's Alertmanager receiver: mTLS with the monitoring CA's client certificates,
holds from fb_action, releases with fb_release, and the ceiling on monitoring holds."""

from __future__ import annotations

import ssl
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner, Result
from support.monitoring import (
    Receiver,
    alert,
    client_certificate,
    notification,
    webhook_client,
)

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.certificates import CertificateAuthority
from fuzzball_core.cli.main import cli


def _post(receiver: Receiver, tmp_path: Path, *alerts: dict) -> list[dict]:
    cert = client_certificate(receiver.ca_dir, tmp_path, "alertmanager")
    with webhook_client(receiver.ca_dir / "ca.crt", cert) as client:
        reply = client.post(receiver.url, json=notification(*alerts))
    assert reply.status_code == 200, reply.text
    return list(reply.json()["alerts"])


def test_a_call_without_a_client_certificate_is_refused(
    make_receiver: Callable[..., Receiver], tmp_path: Path
) -> None:
    receiver = make_receiver()
    receiver.register("node-1")
    with (
        webhook_client(receiver.ca_dir / "ca.crt") as client,
        pytest.raises(
            (httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError, ssl.SSLError)
        ),
    ):
        client.post(receiver.url, json=notification(alert("FuzzballNodeMemoryErrors", "node-1")))
    assert receiver.holds("node-1") == []


def test_a_client_certificate_another_ca_issued_is_refused(
    make_receiver: Callable[..., Receiver], tmp_path: Path
) -> None:
    receiver = make_receiver()
    receiver.register("node-1")
    stranger = CertificateAuthority.create(tmp_path / "other-ca")
    issued = stranger.issue_client_certificate(tmp_path / "x.crt", tmp_path / "x.key", "x")
    with (
        webhook_client(receiver.ca_dir / "ca.crt", (issued.cert_file, issued.key_file)) as client,
        pytest.raises(
            (httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError, ssl.SSLError)
        ),
    ):
        client.post(receiver.url, json=notification(alert("FuzzballNodeMemoryErrors", "node-1")))
    assert receiver.holds("node-1") == []


def test_a_firing_alert_places_one_monitoring_hold_however_often_it_repeats(
    make_receiver: Callable[..., Receiver], tmp_path: Path
) -> None:
    receiver = make_receiver(**{"node-health": {"max-monitoring-held-percent": 100}})
    receiver.register("node-1")
    firing = alert("FuzzballNodeMemoryErrors", "node-1")
    assert _post(receiver, tmp_path, firing)[0]["result"] == "placed"
    assert _post(receiver, tmp_path, firing)[0]["result"] == "already held"
    [hold] = receiver.holds("node-1")
    assert (hold.effect, hold.source) == ("cordon", "monitoring")
    assert hold.reason.startswith("FuzzballNodeMemoryErrors")


def test_a_resolved_alert_with_fb_release_releases_only_its_own_hold(
    make_receiver: Callable[..., Receiver], tmp_path: Path
) -> None:
    receiver = make_receiver(**{"node-health": {"max-monitoring-held-percent": 100}})
    receiver.register("node-1")
    disk = alert("FuzzballNodeDiskIOErrors", "node-1", release=True)
    memory = alert("FuzzballNodeMemoryErrors", "node-1")
    _post(receiver, tmp_path, disk, memory)
    service, admin = receiver.orchestrate.service, receiver.orchestrate.admin
    receiver.orchestrate.call(lambda: service.add_hold(admin, "node-1", "cordon", "repair"))
    resolved = alert("FuzzballNodeDiskIOErrors", "node-1", release=True, status="resolved")
    assert _post(receiver, tmp_path, resolved)[0]["result"] == "released"
    remaining = {(h.source, h.reason.split(":")[0]) for h in receiver.holds("node-1")}
    assert remaining == {("monitoring", "FuzzballNodeMemoryErrors"), ("admin", "repair")}


def test_a_resolved_alert_without_fb_release_keeps_its_hold(
    make_receiver: Callable[..., Receiver], tmp_path: Path
) -> None:
    receiver = make_receiver(**{"node-health": {"max-monitoring-held-percent": 100}})
    receiver.register("node-1")
    _post(receiver, tmp_path, alert("FuzzballNodeMemoryErrors", "node-1"))
    resolved = alert("FuzzballNodeMemoryErrors", "node-1", status="resolved")
    assert _post(receiver, tmp_path, resolved)[0]["result"] == "kept"
    assert len(receiver.holds("node-1")) == 1


def test_uncordon_leaves_a_monitoring_cordon(
    make_receiver: Callable[..., Receiver], tmp_path: Path
) -> None:
    receiver = make_receiver(**{"node-health": {"max-monitoring-held-percent": 100}})
    receiver.register("node-1")
    _post(receiver, tmp_path, alert("FuzzballNodeMemoryErrors", "node-1"))
    service, admin = receiver.orchestrate.service, receiver.orchestrate.admin
    assert receiver.orchestrate.call(lambda: service.uncordon(admin, "node-1")) == 0
    assert [h.source for h in receiver.holds("node-1")] == ["monitoring"]


def test_with_five_nodes_the_second_monitoring_hold_is_refused_and_recorded(
    make_receiver: Callable[..., Receiver], tmp_path: Path
) -> None:
    receiver = make_receiver()  # the default ceiling: 20%, one of five nodes
    for index in range(1, 6):
        receiver.register(f"node-{index}")
    first, second = _post(
        receiver,
        tmp_path,
        alert("FuzzballNodeMemoryErrors", "node-1"),
        alert("FuzzballNodeMemoryErrors", "node-2"),
    )
    assert first["result"] == "placed"
    assert second["result"] == "refused" and "ceiling of pool static" in second["detail"]
    assert receiver.holds("node-2") == []
    refused = [e for e in receiver.node_events("node-2") if e.kind == "node_hold_refused"]
    assert len(refused) == 1 and "FuzzballNodeMemoryErrors" in refused[0].message


def test_the_ceiling_counts_each_provisioner_definitions_nodes_apart(
    make_receiver: Callable[..., Receiver], tmp_path: Path
) -> None:
    receiver = make_receiver(**{"node-health": {"max-monitoring-held-percent": 50}})
    pool = "fuzzball.io/provisioner-definition"
    receiver.register("gpu-1", {pool: "gpu"})
    receiver.register("gpu-2", {pool: "gpu"})
    receiver.register("cpu-1", {pool: "cpu"})
    receiver.register("cpu-2", {pool: "cpu"})
    outcomes = _post(
        receiver,
        tmp_path,
        alert("FuzzballNodeMemoryErrors", "gpu-1"),
        alert("FuzzballNodeMemoryErrors", "gpu-2"),
        alert("FuzzballNodeMemoryErrors", "cpu-1"),
    )
    assert [o["result"] for o in outcomes] == ["placed", "refused", "placed"]


def test_an_alert_without_fb_action_or_for_an_unknown_node_changes_nothing(
    make_receiver: Callable[..., Receiver], tmp_path: Path
) -> None:
    receiver = make_receiver(**{"node-health": {"max-monitoring-held-percent": 100}})
    receiver.register("node-1")
    notify_only = alert("FuzzballNodeHoldCeilingReached", "node-1")
    del notify_only["labels"]["fb_action"]
    outcomes = _post(receiver, tmp_path, notify_only, alert("FuzzballNodeMemoryErrors", "node-99"))
    assert [o["result"] for o in outcomes] == ["ignored", "ignored"]
    assert receiver.holds("node-1") == []


def test_a_body_that_is_not_a_notification_is_a_400_naming_alerts(
    make_receiver: Callable[..., Receiver], tmp_path: Path
) -> None:
    receiver = make_receiver()
    cert = client_certificate(receiver.ca_dir, tmp_path, "alertmanager")
    with webhook_client(receiver.ca_dir / "ca.crt", cert) as client:
        reply = client.post(receiver.url, json={"alerts": "nope"})
    assert reply.status_code == 400 and "alerts" in reply.json()["message"]


def _cli(receiver: Receiver, tmp_path: Path, token: str) -> Callable[..., Result]:
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config-home")}
    runner = CliRunner()
    address = receiver.orchestrate.rest_url
    created = runner.invoke(
        cli, ["context", "create", "t", "--address", address, "--token", token], env=env
    )
    assert created.exit_code == 0, created.output
    return lambda *args: runner.invoke(cli, list(args), env=env)


def test_issue_cert_gives_an_external_alertmanager_a_certificate_the_receiver_accepts(
    make_receiver: Callable[..., Receiver], tmp_path: Path
) -> None:
    receiver = make_receiver(**{"node-health": {"max-monitoring-held-percent": 100}})
    receiver.register("node-1")
    service = receiver.orchestrate.service
    _, admin_token = receiver.orchestrate.call(
        lambda: service.create_account("operator", admin=True)
    )
    fuzzball = _cli(receiver, tmp_path, admin_token)
    result = fuzzball("admin", "monitoring", "issue-cert", "site-am", "--out", str(tmp_path / "am"))
    assert result.exit_code == 0, result.output
    assert (tmp_path / "am" / "site-am.key").stat().st_mode & 0o777 == 0o600
    cert = (tmp_path / "am" / "site-am.crt", tmp_path / "am" / "site-am.key")
    with webhook_client(tmp_path / "am" / "ca.crt", cert) as client:
        reply = client.post(
            receiver.url, json=notification(alert("FuzzballNodeMemoryErrors", "node-1"))
        )
    assert reply.status_code == 200 and reply.json()["alerts"][0]["result"] == "placed"


def test_issue_cert_is_refused_to_a_caller_who_does_not_administer_the_cluster(
    make_receiver: Callable[..., Receiver], tmp_path: Path
) -> None:
    receiver = make_receiver()
    fuzzball = _cli(receiver, tmp_path, receiver.token)  # the monitoring account's
    result = fuzzball("admin", "monitoring", "issue-cert", "x", "--out", str(tmp_path / "x"))
    assert result.exit_code != 0
    assert "administer_cluster" in f"{result.output}{result.exception}"
    assert not (tmp_path / "x" / "x.key").exists()


def test_a_node_with_health_disabled_is_never_held(
    make_receiver: Callable[..., Receiver], tmp_path: Path
) -> None:
    receiver = make_receiver(**{"node-health": {"max-monitoring-held-percent": 100}})
    node_id = receiver.register("node-1")
    monitoring = receiver.orchestrate.orchestrate.monitoring
    assert monitoring is not None
    monitoring.registered(node_id, node_pb2.RegisterRequest(name="node-1", health_disabled=True))
    [outcome] = _post(receiver, tmp_path, alert("FuzzballNodeMemoryErrors", "node-1"))
    assert outcome["result"] == "refused" and "health.disabled" in outcome["detail"]
    assert receiver.holds("node-1") == []
