"""The bundled monitoring stack's configuration: Prometheus and Alertmanager from Debian's
packages, wired to one Orchestrate.

Prometheus reads the shipped rules, finds nodes through Orchestrate's
``/v4/nodes/-/sd_config`` (http_sd, with the monitoring account's token), scrapes them (or
Orchestrate's ``/v4/metrics/node`` relay, in proxy mode) and Orchestrate's own ``/v4/metrics``,
and sends alerts to Alertmanager; Alertmanager routes them with the shipped routes to
Orchestrate's receiver, presenting a client certificate from the monitoring CA.
:func:`write_stack` writes both files; :func:`commands` are the processes to run.
"""

from __future__ import annotations

import copy
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from fuzzball_core.monitoring import ROUTES, RULES

#: Debian's binaries (prometheus, prometheus-alertmanager packages)
PROMETHEUS = "prometheus"
ALERTMANAGER = "prometheus-alertmanager"
ALERTS_PATH = "/v4/monitoring/alerts"


@dataclass(frozen=True)
class StackSettings:
    """One stack: where its files go and what it talks to.

    ``orchestrate`` is Orchestrate's REST root (``http://127.0.0.1:8080``), ``token_file``
    holds the monitoring account's token, ``orchestrate_ca`` the CA of Orchestrate's
    https certificate (None: plain http or the system's roots); ``webhook`` is the receiver's
    ``host:port`` and ``client_cert``/``client_key``/``webhook_ca`` the client certificate
    Alertmanager presents and the CA the receiver's certificate is checked against.
    """

    directory: Path
    orchestrate: str
    token_file: Path
    webhook: str
    client_cert: Path
    client_key: Path
    webhook_ca: Path
    orchestrate_ca: Path | None = None
    prometheus_listen: str = "127.0.0.1:9090"
    alertmanager_listen: str = "127.0.0.1:9093"
    scrape_interval: float = 15.0
    evaluation_interval: float = 15.0
    node_metrics_mode: str = "direct"
    #: Alertmanager's grouping waits for Fuzzball's route (None: the shipped routes' own)
    group_wait: float | None = None
    group_interval: float | None = None

    @property
    def prometheus_file(self) -> Path:
        return self.directory / "prometheus.yml"

    @property
    def alertmanager_file(self) -> Path:
        return self.directory / "alertmanager.yml"


def _seconds(value: float) -> str:
    return f"{int(value * 1000)}ms"


def _orchestrate_client(settings: StackSettings) -> dict[str, Any]:
    """How Prometheus authenticates to Orchestrate (and trusts its certificate)."""
    client: dict[str, Any] = {
        "authorization": {"type": "Bearer", "credentials_file": str(settings.token_file)}
    }
    if settings.orchestrate_ca is not None:
        client["tls_config"] = {"ca_file": str(settings.orchestrate_ca)}
    return client


def prometheus_config(settings: StackSettings) -> dict[str, Any]:
    """prometheus.yml for ``settings``."""
    scheme, _, address = settings.orchestrate.partition("://")
    client = _orchestrate_client(settings)
    nodes: dict[str, Any] = {
        "job_name": "fuzzball-nodes",
        "http_sd_configs": [
            {
                "url": f"{settings.orchestrate}/v4/nodes/-/sd_config"
                f"?mode={settings.node_metrics_mode}",
                "refresh_interval": _seconds(settings.scrape_interval),
                **client,
            }
        ],
    }
    if settings.node_metrics_mode == "proxy":
        nodes |= client  # the relay is Orchestrate's route: the same token
    return {
        "global": {
            "scrape_interval": _seconds(settings.scrape_interval),
            "evaluation_interval": _seconds(settings.evaluation_interval),
        },
        "rule_files": [str(RULES)],
        "alerting": {
            "alertmanagers": [{"static_configs": [{"targets": [settings.alertmanager_listen]}]}]
        },
        "scrape_configs": [
            nodes,
            {
                "job_name": "fuzzball-orchestrate",
                "scheme": scheme or "http",
                "metrics_path": "/v4/metrics",
                "static_configs": [{"targets": [address or settings.orchestrate]}],
                **client,
            },
        ],
    }


def alertmanager_config(settings: StackSettings) -> dict[str, Any]:
    """alertmanager.yml: the shipped routes, their receiver pointed at ``settings.webhook``."""
    config = copy.deepcopy(yaml.safe_load(ROUTES.read_text()))
    for receiver in config["receivers"]:
        for webhook in receiver.get("webhook_configs", ()):
            webhook["url"] = f"https://{settings.webhook}{ALERTS_PATH}"
            webhook["http_config"]["tls_config"] = {
                "ca_file": str(settings.webhook_ca),
                "cert_file": str(settings.client_cert),
                "key_file": str(settings.client_key),
            }
    for route in [config["route"], *config["route"]["routes"]]:
        if settings.group_wait is not None:
            route["group_wait"] = _seconds(settings.group_wait)
        if settings.group_interval is not None:
            route["group_interval"] = _seconds(settings.group_interval)
    return config


def write_stack(settings: StackSettings) -> None:
    """Write both configuration files into ``settings.directory`` (0600: they name keys)."""
    settings.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    for path, config in (
        (settings.prometheus_file, prometheus_config(settings)),
        (settings.alertmanager_file, alertmanager_config(settings)),
    ):
        path.touch(mode=0o600)
        path.write_text(yaml.safe_dump(config, sort_keys=False))


def missing_binaries() -> list[str]:
    """The stack's programs not installed here (Debian: prometheus, prometheus-alertmanager)."""
    return [name for name in (PROMETHEUS, ALERTMANAGER) if shutil.which(name) is None]


def commands(settings: StackSettings) -> dict[str, list[str]]:
    """Process name -> its command line."""
    return {
        "prometheus": [
            PROMETHEUS,
            f"--config.file={settings.prometheus_file}",
            f"--storage.tsdb.path={settings.directory / 'prometheus-data'}",
            f"--web.listen-address={settings.prometheus_listen}",
        ],
        "alertmanager": [
            ALERTMANAGER,
            f"--config.file={settings.alertmanager_file}",
            f"--storage.path={settings.directory / 'alertmanager-data'}",
            f"--web.listen-address={settings.alertmanager_listen}",
            "--cluster.listen-address=",  # one Alertmanager: no gossip port
        ],
    }
