"""The bundled monitoring stack for tests: real Prometheus and Alertmanager (Debian's
packages) on loopback with short intervals, wired to a test Orchestrate, plus what tests use
to talk to them and to Orchestrate's monitoring receiver.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx

from fuzzball_core.certificates import CertificateAuthority
from fuzzball_core.monitoring.stack import StackSettings, commands, missing_binaries, write_stack
from fuzzball_core.scheduling import Resources
from fuzzball_core.vocabulary import AccountKind
from fuzzball_runtime import sweep
from support.cluster import (
    InProcessOrchestrate,
    SubstrateProcess,
    cluster_config,
    free_port,
    write_config,
)

T = TypeVar("T")
ALERTS_PATH = "/v4/monitoring/alerts"


def have_stack() -> str | None:
    """Why the stack cannot run here, or None."""
    missing = missing_binaries()
    if missing:
        return f"needs Debian's prometheus and prometheus-alertmanager ({', '.join(missing)})"
    return None


def wait_until(what: str, check: Callable[[], T | None], timeout: float = 60.0) -> T:
    """Poll ``check`` until it answers something truthy; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        answer = check()
        if answer:
            return answer
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.2)


def client_certificate(ca_dir: Path, directory: Path, name: str) -> tuple[Path, Path]:
    """A client certificate (cert, key) from the monitoring CA kept in ``ca_dir``."""
    ca = CertificateAuthority.load_or_create(ca_dir)
    issued = ca.issue_client_certificate(directory / f"{name}.crt", directory / f"{name}.key", name)
    return issued.cert_file, issued.key_file


def webhook_client(ca_file: Path, cert: tuple[Path, Path] | None = None) -> httpx.Client:
    """An https client of the receiver trusting ``ca_file``, presenting ``cert`` if given."""
    context = ssl.create_default_context(cafile=str(ca_file))
    if cert is not None:
        context.load_cert_chain(str(cert[0]), str(cert[1]))
    return httpx.Client(verify=context, timeout=10)


def alert(
    name: str,
    node: str,
    *,
    action: str = "cordon",
    status: str = "firing",
    release: bool = False,
    fingerprint: str = "",
) -> dict[str, Any]:
    """One alert as Alertmanager's webhook sends it."""
    labels = {"alertname": name, "node": node, "fb_action": action}
    if release:
        labels["fb_release"] = "true"
    return {
        "status": status,
        "labels": labels,
        "annotations": {"summary": f"{name} on {node}"},
        "fingerprint": fingerprint or f"{name}-{node}",
    }


def notification(*alerts: dict[str, Any]) -> dict[str, Any]:
    """An Alertmanager webhook notification (version 4) carrying ``alerts``."""
    return {
        "version": "4",
        "status": alerts[0]["status"],
        "receiver": "fuzzball-holds",
        "alerts": list(alerts),
    }


class MonitoringStack:
    """Prometheus and Alertmanager, started with ``settings`` and stopped by :meth:`close`."""

    def __init__(self, settings: StackSettings) -> None:
        self.settings = settings
        write_stack(settings)
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.logs: dict[str, Path] = {}
        try:
            for name, command in commands(settings).items():
                log = settings.directory / f"{name}.log"
                self.logs[name] = log
                with log.open("wb") as out:
                    self.processes[name] = subprocess.Popen(
                        command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
                    )
            wait_until("Prometheus to be ready", lambda: self._ready(self.prometheus_url))
            wait_until("Alertmanager to be ready", lambda: self._ready(self.alertmanager_url))
        except BaseException:
            self.close()
            raise

    @property
    def prometheus_url(self) -> str:
        return f"http://{self.settings.prometheus_listen}"

    @property
    def alertmanager_url(self) -> str:
        return f"http://{self.settings.alertmanager_listen}"

    def _ready(self, url: str) -> bool:
        for name, process in self.processes.items():
            if process.poll() is not None:
                raise AssertionError(f"{name} exited:\n{self.logs[name].read_text()[-3000:]}")
        try:
            return httpx.get(f"{url}/-/ready", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def targets(self) -> list[dict[str, Any]]:
        """Prometheus's active scrape targets."""
        reply = httpx.get(f"{self.prometheus_url}/api/v1/targets", timeout=5)
        return list(reply.json()["data"]["activeTargets"])

    def query(self, expression: str) -> list[dict[str, Any]]:
        """The result of an instant PromQL query (its vector's samples)."""
        reply = httpx.get(
            f"{self.prometheus_url}/api/v1/query", params={"query": expression}, timeout=5
        )
        return list(reply.json()["data"]["result"])

    def firing(self, alertname: str) -> list[dict[str, Any]]:
        """Prometheus's firing alerts of that name."""
        reply = httpx.get(f"{self.prometheus_url}/api/v1/alerts", timeout=5)
        return [
            a
            for a in reply.json()["data"]["alerts"]
            if a["labels"].get("alertname") == alertname and a["state"] == "firing"
        ]

    def post_alerts(self, alerts: list[dict[str, Any]]) -> None:
        """Send alerts to Alertmanager as a Prometheus would (``endsAt`` past: resolved)."""
        reply = httpx.post(f"{self.alertmanager_url}/api/v2/alerts", json=alerts, timeout=5)
        reply.raise_for_status()

    def close(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def stack_settings(
    directory: Path,
    orchestrate: str,
    token: str,
    webhook: str,
    ca_dir: Path,
    *,
    mode: str = "direct",
) -> StackSettings:
    """Settings for a fast stack (1 s scrapes, evaluations and grouping) over ``orchestrate``."""
    directory.mkdir(parents=True, exist_ok=True)
    token_file = directory / "token"
    token_file.write_text(token)
    cert, key = client_certificate(ca_dir, directory, "alertmanager")
    return StackSettings(
        directory=directory,
        orchestrate=orchestrate,
        token_file=token_file,
        webhook=webhook,
        client_cert=cert,
        client_key=key,
        webhook_ca=ca_dir / "ca.crt",
        prometheus_listen=f"127.0.0.1:{free_port()}",
        alertmanager_listen=f"127.0.0.1:{free_port()}",
        scrape_interval=1.0,
        evaluation_interval=1.0,
        node_metrics_mode=mode,
        group_wait=1.0,
        group_interval=1.0,
    )


#: A hook plugin for Substrate processes: the samples in ``$FUZZBALL_TEST_METRICS_DIR/<node
#: id>.json`` (metric key -> value), so a test raises a node's counters by rewriting it; the
#: EDAC tree of ``<node id>.edac``, when there is one, read by the builtin EDAC source.
_SOURCE = """
import json, os
from pathlib import Path
from fuzzball_core.hookspecs import hookimpl
from fuzzball_plugins.metrics.node_health import memory_errors

@hookimpl
def fuzzball_node_collect_metrics(node_id):
    directory = Path(os.environ["FUZZBALL_TEST_METRICS_DIR"])
    samples = {}
    edac = directory / f"{node_id}.edac"
    if edac.is_dir():
        samples.update(memory_errors(edac))
    listed = directory / f"{node_id}.json"
    if listed.exists():
        samples.update(json.loads(listed.read_text()))
    return samples
"""


def install_test_metric_source(directory: Path) -> Path:
    """Write the test metric source as an installed distribution under ``directory`` (put
    it on PYTHONPATH, with FUZZBALL_TEST_METRICS_DIR, for the Substrate processes)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "fuzzball_test_metric_source.py").write_text(_SOURCE)
    info = directory / "fuzzball_test_metric_source-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: fuzzball-test-metric-source\nVersion: 0.1\n"
    )
    (info / "entry_points.txt").write_text(
        "[fuzzball.plugins]\ntest-metric-source = fuzzball_test_metric_source\n"
    )
    return directory


def write_edac(directory: Path, node_id: str, uncorrected: int, corrected: int = 0) -> None:
    """The node's fake EDAC tree: one memory controller with these counts."""
    controller = directory / f"{node_id}.edac" / "mc0"
    controller.mkdir(parents=True, exist_ok=True)
    (controller / "ue_count").write_text(f"{uncorrected}\n")
    (controller / "ce_count").write_text(f"{corrected}\n")


def write_samples(directory: Path, node_id: str, samples: dict[str, float]) -> None:
    """The node's extra samples."""
    (directory / f"{node_id}.json").write_text(json.dumps(samples))


def python_path(extra: Path) -> str:
    """PYTHONPATH holding ``extra`` and this interpreter's own path."""
    return ":".join([str(extra), *sys.path[1:]])


@dataclass
class Receiver:
    """An in-process Orchestrate with its monitoring receiver on ``webhook``."""

    orchestrate: InProcessOrchestrate
    webhook: str
    ca_dir: Path
    #: the monitoring account's bearer token
    token: str

    @property
    def url(self) -> str:
        return f"https://{self.webhook}/v4/monitoring/alerts"

    def register(self, name: str, annotations: dict[str, str] | None = None) -> str:
        """A scripted node (no agent behind it); its id."""
        engine = self.orchestrate.orchestrate.engine
        return self.orchestrate.call(
            lambda: engine.register_node(name, Resources(2, 1 << 30), annotations or {})
        )

    def wait_serving(self, scratch: Path) -> None:
        """Wait until the receiver answers a certified client (so that a refusal a test
        sees is the handshake's, never a receiver not listening yet)."""
        # Orchestrate makes its CA as the receiver starts: issue from that one, never race it
        wait_until("the monitoring CA", lambda: (self.ca_dir / "webhook.crt").exists(), 30)
        cert = client_certificate(self.ca_dir, scratch, "readiness")

        def answers() -> bool:
            try:
                with webhook_client(self.ca_dir / "ca.crt", cert) as client:
                    return client.post(self.url, json={"alerts": []}).status_code == 200
            except (httpx.HTTPError, OSError):
                return False

        wait_until("the monitoring receiver to serve", answers, timeout=30)

    def holds(self, node: str) -> list[Any]:
        service, admin = self.orchestrate.service, self.orchestrate.admin
        return self.orchestrate.call(lambda: service.list_holds(admin, node))

    def node_events(self, node: str) -> list[Any]:
        service, admin = self.orchestrate.service, self.orchestrate.admin
        node_id = self.orchestrate.call(lambda: service.get_node(admin, node)).id
        return self.orchestrate.call(lambda: service.list_node_events(admin, node_id))


class MonitoredCluster:
    """Orchestrate (in this process) serving its monitoring receiver, Substrate agents that
    load the test metric source, and the bundled stack (1 s intervals) watching them.

    Each agent serves fuzzball_node_* on its own loopback port (no node_exporter: several
    agents share this machine); a test raises a node's counters with :func:`write_edac` or
    :func:`write_samples` in :attr:`metrics_dir`.
    """

    def __init__(
        self,
        directory: Path,
        registry_url: str,
        *,
        agents: int = 2,
        mode: str = "direct",
        settings: dict[str, Any] | None = None,
    ) -> None:
        self.directory = directory
        self.registry_url = registry_url
        self.grpc_port = free_port()
        self.rest_port = free_port()
        self.webhook = f"127.0.0.1:{free_port()}"
        self.ca_dir = directory / "monitoring-ca"
        self.metrics_dir = directory / "node-metrics"
        self.metrics_dir.mkdir(parents=True)
        self.plugin_dir = install_test_metric_source(directory / "test-metric-source")
        config = self._config()
        config["monitoring"] = {"webhook-listen": self.webhook, "ca-dir": str(self.ca_dir)}
        config.update(settings or {})
        self.orchestrate = InProcessOrchestrate(config)
        self.agents: list[SubstrateProcess] = []
        self.stack: MonitoringStack | None = None
        try:
            receiver = Receiver(self.orchestrate, self.webhook, self.ca_dir, "")
            receiver.wait_serving(directory)
            service = self.orchestrate.service
            _, self.token = self.orchestrate.call(
                lambda: service.create_account("monitoring", kind=AccountKind.MONITORING)
            )
            for _ in range(agents):
                self.add_agent()
            self.wait_for_nodes(agents)
            self.stack = MonitoringStack(
                stack_settings(
                    directory / "stack",
                    self.orchestrate.rest_url,
                    self.token,
                    self.webhook,
                    self.ca_dir,
                    mode=mode,
                )
            )
        except BaseException:
            self.close()
            raise

    def _config(self, substrate: dict[str, Any] | None = None) -> dict[str, Any]:
        return cluster_config(
            self.directory,
            self.registry_url,
            grpc_port=self.grpc_port,
            rest_port=self.rest_port,
            substrate=substrate,
        )

    def add_agent(self) -> str:
        """Start one more agent (``node-N``); its name."""
        name = f"node-{len(self.agents) + 1}"
        config = self._config(
            {
                "node-name": name,
                "work-dir": str(self.directory / name),
                "cores": 2,
                "memory": "1GiB",
                "metrics-listen": f"127.0.0.1:{free_port()}",
                "node-exporter-listen": "",
            }
        )
        path = write_config(self.directory / f"{name}.yaml", config)
        wrapper = [
            "env",
            f"PYTHONPATH={python_path(self.plugin_dir)}",
            f"FUZZBALL_TEST_METRICS_DIR={self.metrics_dir}",
        ]
        self.agents.append(SubstrateProcess(path, self.directory / f"{name}.log", wrapper))
        return name

    def node_id(self, name: str) -> str:
        service, admin = self.orchestrate.service, self.orchestrate.admin
        return str(self.orchestrate.call(lambda: service.get_node(admin, name)).id)

    def holds(self, name: str) -> list[Any]:
        service, admin = self.orchestrate.service, self.orchestrate.admin
        return list(self.orchestrate.call(lambda: service.list_holds(admin, name)))

    def wait_for_nodes(self, count: int) -> None:
        def ready() -> bool:
            for agent in self.agents:
                if agent.process.poll() is not None:
                    raise AssertionError(f"an agent exited:\n{agent.log()[-3000:]}")
            return sum(n.status == "READY" for n in self.orchestrate.nodes()) >= count

        wait_until(f"{count} nodes", ready)

    def scraped(self, name: str) -> bool:
        """Whether Prometheus scrapes node ``name``'s fuzzball_node_* endpoint healthily."""
        assert self.stack is not None
        return any(
            t["labels"].get("node") == name
            and t["labels"].get("exporter") == "fuzzball"
            and t["health"] == "up"
            for t in self.stack.targets()
        )

    def close(self) -> None:
        if self.stack is not None:
            self.stack.close()
        for index, agent in enumerate(self.agents):
            agent.stop()
            sweep(self.directory / f"node-{index + 1}" / "runtime")
        self.orchestrate.close()
