"""The embedded single-machine deployment behind ``fuzzball local up|down|status``.

``up`` writes one configuration for both processes (the user's ``--config`` merged with a
generated node token), creates the first admin account and its token, starts Orchestrate
(SQLite) and one Substrate in the background with their logs in the deployment directory,
waits until the node is ready, and points the CLI's ``local`` context at it, signed in as the
owner of the first organization (created by the first ``up``: :mod:`~fuzzball_core.cli.
local_owner`). The admin token, the operator's, is kept in the deployment directory and reused
by the next ``up`` while it is valid (a new one only once it has expired or was revoked).
The data and deployment directories are 0700; the configuration, token and log files 0600.
REST and gRPC are served over TLS with a CA of the deployment's own, which the ``local``
context names in ``cafile`` (:mod:`~fuzzball_core.cli.local_tls`), unless the user's
configuration has a ``tls`` section of its own.

A process counts as running only when ``/proc`` shows it alive and running the command
this deployment started it with (:mod:`~fuzzball_core.cli.detached_processes`). So ``up``
after a crash restarts what died, and ``down`` never signals a stranger. ``up`` is done when both
processes answer ready on their ``/readyz`` (Orchestrate's store and engine loop; the node's
registration and stream), not when a node record says READY, which it still does for a while
after Substrate crashed; ``status`` shows those conditions.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from fuzzball_core.cli import monitoring_stack
from fuzzball_core.cli.contexts import ContextsFile
from fuzzball_core.cli.detached_processes import running_pid, start_detached
from fuzzball_core.cli.local_owner import DEFAULT_ORGANIZATION, DEFAULT_OWNER, sign_in_owner
from fuzzball_core.cli.local_provisioning import add_local_definition, delete_local_instances
from fuzzball_core.cli.local_tls import rest_url, secure_deployment, trust
from fuzzball_core.config import FuzzballConfig, config_path, load_config
from fuzzball_core.errors import AlreadyExists, FailedPrecondition, Unauthenticated, Unavailable
from fuzzball_core.service.accounts import Accounts
from fuzzball_core.store.database import connect, migrate, session_factory
from fuzzball_core.store.private_files import open_private, private_directory
from fuzzball_core.vocabulary import AccountKind

CONTEXT_NAME = "local"
#: the administrator account ``up`` creates and holds a token of
ADMIN_ACCOUNT = "admin"
PROCESSES = ("orchestrate", "substrate")

#: each process's entry module and the arguments after ``--config FILE``
COMMANDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "orchestrate": ("fuzzball_core.orchestrate.server", ("serve",)),
    "substrate": ("fuzzball_core.substrate.main", ()),
}


@dataclass(frozen=True)
class Deployment:
    """Where a local deployment keeps its configuration, pids and logs."""

    directory: Path

    @property
    def config_file(self) -> Path:
        return self.directory / "config.yaml"

    def pid_file(self, process: str) -> Path:
        return self.directory / f"{process}.pid"

    def log_file(self, process: str) -> Path:
        return self.directory / f"{process}.log"

    @property
    def token_file(self) -> Path:
        """The admin token ``up`` keeps and reuses (0600)."""
        return self.directory / "admin.token"

    def argv(self, process: str) -> list[str]:
        """The command that starts ``process`` of this deployment."""
        module, arguments = COMMANDS[process]
        code = f"from {module} import main; main()"
        return [sys.executable, "-c", code, "--config", str(self.config_file), *arguments]

    def pid(self, process: str) -> int | None:
        """The process's pid if it is alive and ours (:func:`running_pid`), else None."""
        return running_pid(self.pid_file(process), self.argv(process))


#: where ``up`` tells what it is doing (the CLI prints each line on stderr)
Progress = Callable[[str], None]


def _quiet(message: str) -> None:
    pass


def deployment_for(config: FuzzballConfig) -> Deployment:
    """The deployment directory of a configuration (``<data-dir>/local``)."""
    return Deployment(config.data_dir / "local")


#: where ``local up``'s endpoint proxy listens unless the configuration says otherwise
LOCAL_ENDPOINTS = "127.0.0.1:8081"


def _merged_config(
    user_file: Path | None, deployment: Deployment, *, monitoring: bool = True
) -> dict[str, Any]:
    """The user's configuration with what the local deployment needs filled in."""
    document: dict[str, Any] = {}
    if user_file is not None:
        document = yaml.safe_load(user_file.read_text()) or {}
    previous: dict[str, Any] = {}
    if deployment.config_file.exists():
        previous = yaml.safe_load(deployment.config_file.read_text()) or {}
    token = (
        document.get("orchestrate", {}).get("node-token")
        or previous.get("orchestrate", {}).get("node-token")
        or secrets.token_urlsafe(32)
    )
    document.setdefault("orchestrate", {})["node-token"] = token
    substrate = document.setdefault("substrate", {})
    substrate["node-token"] = token
    substrate.setdefault(
        "orchestrate-address",
        document["orchestrate"].get("grpc-listen", FuzzballConfig().orchestrate.grpc_listen),
    )
    substrate.setdefault("work-dir", str(deployment.directory / "node"))
    scheme = secure_deployment(document, deployment.directory)  # the local CA, unless said
    # the node reads fuzzball:// images from (and uploads builds to) Orchestrate's object cache
    images = document.setdefault("images", {})
    rest = document["orchestrate"].get("rest-listen", FuzzballConfig().orchestrate.rest_listen)
    images.setdefault("object-cache-url", f"{scheme}://{rest}")
    images.setdefault("object-cache-token", token)
    # services' endpoints are reached through the proxy (over TLS with the local CA)
    document["orchestrate"].setdefault("endpoints", {}).setdefault("listen", LOCAL_ENDPOINTS)
    monitoring_stack.prepare(document, deployment.directory, enabled=monitoring)
    return document


def admin_token(config: FuzzballConfig, deployment: Deployment, known: str = "") -> str:
    """The deployment's admin token: the one it keeps (or ``known``, the ``local`` context's)
    while Orchestrate still accepts it as an administrator's, else a new one, kept for the
    next ``up`` (0600 in the deployment directory). Minting one on every ``up`` left every
    earlier token valid."""
    database = connect(config.database_url)
    try:
        migrate(database)
        lifetime = config.accounts.token_lifetime
        accounts = Accounts(session_factory(database), token_lifetime=lifetime)
        kept = deployment.token_file.read_text().strip() if deployment.token_file.exists() else ""
        for candidate in dict.fromkeys(t for t in (kept, known) if t):
            try:
                if accounts.authenticate(candidate).is_admin:
                    token = candidate
                    break
            except Unauthenticated:
                continue  # expired, revoked, or of another deployment's database
        else:
            try:
                _, token = accounts.create(ADMIN_ACCOUNT, kind=AccountKind.ADMIN)
            except AlreadyExists:
                token = accounts.issue_token(ADMIN_ACCOUNT)
    finally:
        database.dispose()
    with open_private(deployment.token_file) as out:
        out.write(f"{token}\n".encode())
    return token


def _start(deployment: Deployment, process: str) -> subprocess.Popen[bytes]:
    return start_detached(
        deployment.argv(process), deployment.pid_file(process), deployment.log_file(process)
    )


def _api_base(config: FuzzballConfig) -> str:
    return f"{rest_url(config)}/v3"


def health_url(config: FuzzballConfig, process: str) -> str | None:
    """Where ``process`` serves its health (``/readyz`` beside it): Orchestrate on its REST
    port, Substrate on its metrics port (None when that is switched off)."""
    if process == "orchestrate":
        return rest_url(config)
    listen = config.node_metrics_listen
    return f"http://{listen}" if listen else None


def readiness(config: FuzzballConfig, process: str) -> dict[str, Any]:
    """``process``'s ``/readyz``: whether it is ready and its conditions, or why it could
    not be asked (``ready`` False, ``problem`` saying why)."""
    base = health_url(config, process)
    if base is None:
        return {"ready": None, "conditions": [], "problem": "substrate.metrics-listen is off"}
    try:
        reply = httpx.get(f"{base}/readyz", timeout=2, verify=trust(config))
        body = reply.json()
    except (httpx.HTTPError, ValueError) as exc:
        return {"ready": False, "conditions": [], "problem": str(exc) or type(exc).__name__}
    if not isinstance(body, dict) or body.get("process") != process:
        # something else answers on that port (a node exporter on 9100): not our health
        return {"ready": None, "conditions": [], "problem": f"{base} is not {process}'s"}
    return {"ready": reply.status_code == 200, "conditions": body.get("conditions", [])}


def _unready(conditions: list[dict[str, Any]]) -> str:
    failing = [f"{c.get('name')}: {c.get('message')}" for c in conditions if not c.get("ok")]
    return "; ".join(failing) or "not ready"


def _wait_until_ready(
    config: FuzzballConfig,
    token: str,
    deployment: Deployment,
    children: dict[str, subprocess.Popen[bytes]],
    timeout: float,
    *,
    want_node: bool = True,
    progress: Progress = _quiet,
) -> list[dict[str, Any]]:
    """Wait until Orchestrate and the node are ready (Orchestrate alone without
    ``want_node``: nodes are provisioned on demand); return the nodes.

    A node's READY record alone does not do: after a crash of Substrate it stays READY
    until its lease runs out, while the restarted agent has not registered yet. So the
    agent's own ``/readyz`` (registered, stream up) decides; only when its metrics port is
    off (or taken by something else) does the node's READY record. What it waits for is
    told to ``progress`` each time that changes.
    """
    deadline = time.monotonic() + timeout
    headers = {"Authorization": f"Bearer {token}"}
    last_error = told = "no answer yet"
    while time.monotonic() < deadline:
        for process, child in children.items():
            if child.poll() is not None:
                raise Unavailable(
                    f"{process} exited during start-up; see {deployment.log_file(process)}"
                )
        unready = [
            f"{process} {_unready(seen['conditions']) if seen['conditions'] else seen['problem']}"
            for process in (PROCESSES if want_node else ("orchestrate",))
            if (seen := readiness(config, process))["ready"] is False
        ]
        try:
            reply = httpx.get(
                f"{_api_base(config)}/nodes", headers=headers, timeout=2, verify=trust(config)
            )
            if unready:
                last_error = "; ".join(unready)
            elif reply.status_code == 200:
                nodes = reply.json().get("nodes", [])
                if not want_node and not unready:
                    return nodes
                if any(str(n.get("status", "")).upper().endswith("READY") for n in nodes):
                    return nodes
                last_error = "no node is ready yet"
            else:
                last_error = f"HTTP {reply.status_code}"
        except httpx.HTTPError as exc:
            last_error = str(exc) or type(exc).__name__
        if last_error != told:
            progress(f"waiting: {last_error}")
            told = last_error
        time.sleep(0.2)
    raise Unavailable(
        f"the local deployment did not become ready in {timeout:g}s ({last_error}); see"
        f" {deployment.log_file('orchestrate')} and {deployment.log_file('substrate')}"
    )


def up(
    user_config: str | os.PathLike[str] | None,
    *,
    timeout: float = 60.0,
    organization: str = DEFAULT_ORGANIZATION,
    owner_email: str = DEFAULT_OWNER,
    monitoring: bool = True,
    provisioner: str | None = None,
    progress: Progress = _quiet,
) -> dict[str, Any]:
    """Start the local deployment; return where things are. Idempotent when already up.
    Each step, and what the wait for readiness is waiting on, is told to ``progress``.

    With ``provisioner`` (``local``) no node is started: nodes are provisioned when work
    needs them (:mod:`~fuzzball_core.cli.local_provisioning`).

    The first ``up`` creates ``organization`` and its owner ``owner_email``; every ``up``
    leaves the ``local`` context signed in as that owner (:mod:`~fuzzball_core.cli.
    local_owner`)."""
    if os.geteuid() != 0:
        raise FailedPrecondition(
            "fuzzball local up must run as root: Substrate starts"
            " containers with namespaces, loop devices and cgroups"
        )
    user_file = config_path(user_config)
    base = load_config(user_file)  # validates the user's file before anything starts
    deployment = deployment_for(base)
    private_directory(base.data_dir)
    private_directory(deployment.directory)
    document = _merged_config(user_file, deployment, monitoring=monitoring)
    if provisioner is not None:
        add_local_definition(document, deployment.directory, deployment.config_file, provisioner)
    merged = yaml.safe_dump(document, sort_keys=False)
    with open_private(deployment.config_file) as out:  # it holds the node token
        out.write(merged.encode())
    config = load_config(deployment.config_file)

    contexts = ContextsFile.load()
    children: dict[str, subprocess.Popen[bytes]] = {}
    has_context = any(c.name == CONTEXT_NAME for c in contexts.contexts)
    known = contexts.get(CONTEXT_NAME).token if has_context else ""
    token = admin_token(config, deployment, known)
    for process in PROCESSES if provisioner is None else ("orchestrate",):
        pid = deployment.pid(process)
        if pid is None:
            progress(f"starting {process} (log: {deployment.log_file(process)})")
            children[process] = _start(deployment, process)
        else:
            progress(f"{process} is already running (pid {pid})")

    address = rest_url(config)
    if any(c.name == CONTEXT_NAME for c in contexts.contexts):
        context = contexts.get(CONTEXT_NAME)
        context.entry["address"] = address
    else:
        context = contexts.create(CONTEXT_NAME, address)
    context.ca_file = str(config.tls.ca_file) if config.tls.ca_file else ""
    # the CLI works as the first organization's owner; the admin token stays the operator's
    owner = sign_in_owner(
        config,
        deployment.directory,
        context,
        address,
        token,
        organization=organization,
        owner_email=owner_email,
    )
    contexts.use(CONTEXT_NAME)
    contexts.save()

    nodes = _wait_until_ready(
        config,
        token,
        deployment,
        children,
        timeout,
        want_node=provisioner is None,
        progress=progress,
    )
    if config.monitoring.enabled:
        progress("starting Prometheus and Alertmanager")
    return {
        "api": address,
        "context": CONTEXT_NAME,
        "data": str(config.data_dir),
        "config": str(deployment.config_file),
        "logs": {p: str(deployment.log_file(p)) for p in PROCESSES},
        "nodes": [str(n.get("hostName") or n.get("id")) for n in nodes],
        "owner": owner,
        # Prometheus and Alertmanager (issue 15), unless monitoring.enabled is false
        "monitoring": monitoring_stack.start(config, deployment.directory, address),
    }


def down(user_config: str | os.PathLike[str] | None, *, timeout: float = 20.0) -> list[str]:
    """Stop Substrate, then Orchestrate, then the monitoring stack; return what was
    stopped."""
    deployment = deployment_for(load_config(config_path(user_config)))
    stopped = []
    if deployment.config_file.exists():  # nodes provisioned on demand go first
        deleted = delete_local_instances(load_config(deployment.config_file))
        stopped += [f"provisioned node {name}" for name in deleted]
    for process in reversed(PROCESSES):
        pid = deployment.pid(process)
        if pid is None:
            # dead (or the pid is a stranger's now): nothing of ours to stop
            deployment.pid_file(process).unlink(missing_ok=True)
            continue
        # started with start_new_session: the group is the process and whatever it started
        os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while deployment.pid(process) is not None and time.monotonic() < deadline:
            time.sleep(0.1)
        if deployment.pid(process) is not None:
            os.killpg(pid, signal.SIGKILL)
        deployment.pid_file(process).unlink(missing_ok=True)
        stopped.append(process)
    if deployment.config_file.exists():  # Prometheus and Alertmanager, as up served them
        served = load_config(deployment.config_file)
        stopped += monitoring_stack.stop(served, deployment.directory, timeout=timeout)
    return stopped


def status(user_config: str | os.PathLike[str] | None) -> dict[str, Any]:
    """Which local processes run, whether they are ready and their health conditions (from
    their ``/readyz``), and where their logs are."""
    config = load_config(config_path(user_config))
    deployment = deployment_for(config)
    if deployment.config_file.exists():  # what up served with: its TLS, its node token
        config = load_config(deployment.config_file)
    report: dict[str, Any] = {}
    for process in PROCESSES:
        pid = deployment.pid(process)
        seen = readiness(config, process) if pid is not None else {"ready": False}
        report[process] = {
            "running": pid is not None,
            "pid": pid,
            "log": str(deployment.log_file(process)),
            "ready": seen["ready"],
            "conditions": seen.get("conditions", []),
            **({"problem": seen["problem"]} if "problem" in seen else {}),
        }
    report.update(monitoring_stack.status(config, deployment.directory))
    return report
