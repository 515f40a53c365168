"""A persistent endpoint's URL across an Orchestrate crash: the proxy comes back with
Orchestrate, and the same URL reaches the same service, which never stopped."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.cluster import (
    LocalRegistry,
    OrchestrateProcess,
    SubstrateProcess,
    build_orchestrate,
    cluster_config,
    free_port,
    write_config,
)
from support.endpoint_stack import bearer, wait_until

from fuzzball_core.config import parse_config

pytestmark = pytest.mark.slow

WEB = """
version: v1
services:
  web:
    image: {{uri: docker://alpine:latest}}
    script: |
      busybox mkdir -p /www && echo "pid $$" > /www/index.html
      exec busybox httpd -f -p {port} -h /www
    network:
      ports: [{{name: http, port: {port}}}]
      endpoints: [{{name: site, port-name: http, persistent: true}}]
    readiness-probe: {{http-get: {{port: {port}, path: /index.html}}, period-seconds: 1}}
"""


@pytest.fixture
def processes(tmp_path: Path, local_registry: LocalRegistry) -> Iterator[dict[str, object]]:
    port, proxy = free_port(), free_port()
    endpoints = {"endpoints": {"listen": f"127.0.0.1:{proxy}"}}
    base = cluster_config(tmp_path, local_registry.url, grpc_port=port, orchestrate=endpoints)
    orchestrate = OrchestrateProcess(
        write_config(tmp_path / "orchestrate.yaml", base), tmp_path / "orchestrate.log"
    )
    agent = cluster_config(
        tmp_path,
        local_registry.url,
        grpc_port=port,
        substrate={"node-name": "web-node", "work-dir": str(tmp_path / "node"), "cores": 2},
    )
    write_config(tmp_path / "agent.yaml", agent)
    started: dict[str, object] = {"orchestrate": orchestrate, "config": base, "proxy": proxy}
    try:
        yield started
    finally:
        running = started.get("agent")
        if isinstance(running, SubstrateProcess):
            running.stop()
        orchestrate.stop()


def test_a_persistent_endpoint_answers_again_after_orchestrate_restarts(
    processes: dict[str, object], tmp_path: Path
) -> None:
    config = parse_config(processes["config"])
    rest = f"http://{config.orchestrate.rest_listen}/v3"
    # accounts and the workflow go into the store before Orchestrate serves, as in
    # tests/e2e/test_orchestrate_restart.py
    service = build_orchestrate(config).service
    _, token = service.create_account("web-owner")
    orchestrate = processes["orchestrate"]
    assert isinstance(orchestrate, OrchestrateProcess)
    orchestrate.start()
    processes["agent"] = SubstrateProcess(tmp_path / "agent.yaml", tmp_path / "agent.log")
    auth = {"Authorization": f"Bearer {token}"}
    endpoint = wait_until(
        lambda: _post(f"{rest}/endpoints", {"name": "site"}, auth),
        lambda answer: answer.status_code == 200,
    ).json()
    url = f"http://127.0.0.1:{processes['proxy']}/endpoints/{endpoint['id']}/index.html"
    started = httpx.post(
        f"{rest}/workflows", json={"rawSpecification": WEB.format(port=free_port())}, headers=auth
    )
    assert started.status_code == 200, started.text
    before = wait_until(
        lambda: _get(url, bearer(token)), lambda answer: answer.status_code == 200, 180
    )

    orchestrate.kill()
    orchestrate.start()
    after = wait_until(
        lambda: _get(url, bearer(token)), lambda answer: answer.status_code == 200, 120
    )

    assert after.text == before.text  # the same process served both: it never stopped


def _get(url: str, headers: dict[str, str]) -> httpx.Response:
    """GET, a refused connection (Orchestrate starting) read as 503."""
    try:
        return httpx.get(url, headers=headers, timeout=10)
    except httpx.TransportError:
        return httpx.Response(503, text="not listening")


def _post(url: str, body: dict, headers: dict[str, str]) -> httpx.Response:
    try:
        return httpx.post(url, json=body, headers=headers, timeout=10)
    except httpx.TransportError:
        return httpx.Response(503, text="not listening")
