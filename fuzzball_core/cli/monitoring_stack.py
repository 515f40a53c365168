"""The monitoring stack of ``fuzzball local up``: Debian's Prometheus and Alertmanager
beside the local Orchestrate and Substrate (``monitoring.enabled``, on by default;
``fuzzball local up --no-monitoring`` or ``monitoring.enabled: false`` leaves them off).

``up`` prepares the deployment's configuration (Orchestrate's receiver on
``monitoring.webhook-listen``, 127.0.0.1:9443 unless set; the monitoring CA made before
Orchestrate starts, so both sides share it), then writes the stack's files
(:mod:`fuzzball_core.monitoring.stack`: the shipped rules and routes, http_sd against
Orchestrate with a ``monitoring`` service account's token, Alertmanager's client
certificate) and starts both processes; ``status`` shows them like Orchestrate and
Substrate; ``down`` stops them. Pid files are trusted only when ``/proc`` shows that very
command alive, as the deployment's own are.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path
from typing import Any

import httpx

from fuzzball_core.certificates import CertificateAuthority
from fuzzball_core.cli.detached_processes import running_pid, start_detached
from fuzzball_core.config import FuzzballConfig
from fuzzball_core.errors import AlreadyExists, Unauthenticated
from fuzzball_core.monitoring.stack import StackSettings, commands, missing_binaries, write_stack
from fuzzball_core.service.accounts import Accounts
from fuzzball_core.store.database import connect, migrate, session_factory
from fuzzball_core.store.private_files import open_private
from fuzzball_core.vocabulary import AccountKind

log = logging.getLogger("fuzzball.local")

STACK = ("prometheus", "alertmanager")
MONITORING_ACCOUNT = "monitoring"
DEFAULT_WEBHOOK = "127.0.0.1:9443"


def _directory(deployment_dir: Path) -> Path:
    return deployment_dir / "monitoring"


def prepare(document: dict[str, Any], deployment_dir: Path, *, enabled: bool = True) -> None:
    """Fill in the deployment configuration's monitoring keys (what the user set stays)."""
    monitoring = document.setdefault("monitoring", {})
    if not enabled:
        monitoring["enabled"] = False
    if not monitoring.get("enabled", True):
        # no Prometheus scrapes it: the node starts no node_exporter (it listened on every
        # interface of the machine for nobody), unless the user's configuration says where
        document.setdefault("substrate", {}).setdefault("node-exporter-listen", "")
        return
    monitoring.setdefault("webhook-listen", DEFAULT_WEBHOOK)
    ca_dir = Path(monitoring.setdefault("ca-dir", str(_directory(deployment_dir) / "ca")))
    ca_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    CertificateAuthority.load_or_create(ca_dir)
    # one node: the default 20% ceiling would let monitoring hold none of it
    document.setdefault("node-health", {}).setdefault("max-monitoring-held-percent", 100)


def _monitoring_token(config: FuzzballConfig, token_file: Path) -> str:
    """The ``monitoring`` service account's token: the one kept while it is valid, else a new
    one (the account made on the first ``up``)."""
    database = connect(config.database_url)
    try:
        migrate(database)
        accounts = Accounts(
            session_factory(database), token_lifetime=config.accounts.token_lifetime
        )
        kept = token_file.read_text().strip() if token_file.exists() else ""
        try:
            if kept and accounts.authenticate(kept).kind == AccountKind.MONITORING:
                return kept
        except Unauthenticated:
            pass
        try:
            _, token = accounts.create(MONITORING_ACCOUNT, kind=AccountKind.MONITORING)
        except AlreadyExists:
            token = accounts.issue_token(MONITORING_ACCOUNT)
    finally:
        database.dispose()
    with open_private(token_file) as out:
        out.write(f"{token}\n".encode())
    return token


def settings_for(
    config: FuzzballConfig, deployment_dir: Path, orchestrate_url: str
) -> StackSettings:
    """The stack's settings for the deployment."""
    directory = _directory(deployment_dir)
    ca_dir = config.monitoring_ca_dir
    return StackSettings(
        directory=directory,
        orchestrate=orchestrate_url,
        token_file=directory / "monitoring.token",
        webhook=config.monitoring.webhook_listen,
        client_cert=directory / "alertmanager.crt",
        client_key=directory / "alertmanager.key",
        webhook_ca=ca_dir / "ca.crt",
        orchestrate_ca=None if config.tls.plaintext else config.tls.ca_file,
        prometheus_listen=config.monitoring.prometheus_listen,
        alertmanager_listen=config.monitoring.alertmanager_listen,
        scrape_interval=config.monitoring.scrape_interval,
        evaluation_interval=config.monitoring.evaluation_interval,
        node_metrics_mode=config.monitoring.node_metrics_mode,
    )


def _pid(directory: Path, name: str, argv: list[str]) -> int | None:
    """The stack process's pid when it is alive and runs exactly ``argv``."""
    return running_pid(directory / f"{name}.pid", argv)


def start(config: FuzzballConfig, deployment_dir: Path, orchestrate_url: str) -> dict[str, Any]:
    """Start what of the stack is not running; what ``up`` reports about it."""
    if not config.monitoring.enabled:
        return {"enabled": False}
    missing = missing_binaries()
    if missing:
        log.warning(
            "the monitoring stack is not started: %s not installed (apt-get install"
            " prometheus prometheus-alertmanager), or set monitoring.enabled: false",
            ", ".join(missing),
        )
        return {"enabled": True, "problem": f"not installed: {', '.join(missing)}"}
    settings = settings_for(config, deployment_dir, orchestrate_url)
    settings.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    _monitoring_token(config, settings.token_file)
    ca = CertificateAuthority.load_or_create(config.monitoring_ca_dir)
    if not settings.client_cert.exists():
        ca.issue_client_certificate(settings.client_cert, settings.client_key, "local-alertmanager")
    write_stack(settings)
    for name, argv in commands(settings).items():
        if _pid(settings.directory, name, argv) is not None:
            continue
        start_detached(argv, settings.directory / f"{name}.pid", settings.directory / f"{name}.log")
    return {
        "enabled": True,
        "prometheus": f"http://{settings.prometheus_listen}",
        "alertmanager": f"http://{settings.alertmanager_listen}",
    }


def status(config: FuzzballConfig, deployment_dir: Path) -> dict[str, dict[str, Any]]:
    """``local status`` rows for the stack's processes (none when monitoring is off)."""
    if not config.monitoring.enabled:
        return {}
    settings = settings_for(config, deployment_dir, "")
    listens = {
        "prometheus": settings.prometheus_listen,
        "alertmanager": settings.alertmanager_listen,
    }
    report: dict[str, dict[str, Any]] = {}
    for name, argv in commands(settings).items():
        pid = _pid(settings.directory, name, argv)
        ready: bool | None = False
        problem = ""
        if pid is not None:
            try:
                reply = httpx.get(f"http://{listens[name]}/-/ready", timeout=2)
                ready = reply.status_code == 200
            except httpx.HTTPError as exc:
                problem = str(exc) or type(exc).__name__
        report[name] = {
            "running": pid is not None,
            "pid": pid,
            "log": str(settings.directory / f"{name}.log"),
            "ready": ready,
            "conditions": [],
            **({"problem": problem} if problem else {}),
        }
    return report


def stop(config: FuzzballConfig, deployment_dir: Path, *, timeout: float = 20.0) -> list[str]:
    """Stop the stack's processes; the names of those stopped."""
    settings = settings_for(config, deployment_dir, "")
    stopped = []
    for name, argv in commands(settings).items():
        pid = _pid(settings.directory, name, argv)
        if pid is None:  # dead, or the pid is a stranger's now: nothing of ours to stop
            (settings.directory / f"{name}.pid").unlink(missing_ok=True)
            continue
        os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _pid(settings.directory, name, argv) is not None and time.monotonic() < deadline:
            time.sleep(0.1)
        if _pid(settings.directory, name, argv) is not None:
            os.killpg(pid, signal.SIGKILL)
        (settings.directory / f"{name}.pid").unlink(missing_ok=True)
        stopped.append(name)
    return stopped
