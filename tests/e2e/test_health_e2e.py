"""Health endpoints of a real cluster: Orchestrate's ``/healthz`` and ``/readyz`` on its REST
port and Substrate's on its metrics port, without a token, each a JSON list of conditions;
and a full data disk answered over REST with a RESOURCE_EXHAUSTED Status naming the data
directory, the API carrying on once space is back, without a restart."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.cluster import Cluster, InProcessOrchestrate, LocalRegistry, cluster_config, free_port

pytestmark = [pytest.mark.root, pytest.mark.slow]

ONE_JOB = """
version: v1
jobs:
  hello:
    image: {uri: docker://alpine:latest}
    command: [echo, hi]
"""


def conditions(reply: httpx.Response) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in reply.json()["conditions"]}


def readyz_until(url: str, wanted: Callable[[httpx.Response], bool]) -> httpx.Response:
    """``url``'s ``/readyz`` once ``wanted(reply)``; a hang guard bounds the wait."""
    deadline = time.monotonic() + 60
    last: Any = "no answer"
    while time.monotonic() < deadline:
        try:
            last = httpx.get(f"{url}/readyz", timeout=5)
            if wanted(last):
                return last
        except httpx.TransportError as exc:
            last = exc
        time.sleep(0.1)
    raise AssertionError(f"{url}/readyz never answered as wanted; last: {last}")


@pytest.fixture
def health_cluster(make_cluster) -> tuple[Cluster, str]:
    """One agent with its metrics (and health) on a free port; (cluster, agent's URL)."""
    metrics = f"127.0.0.1:{free_port()}"
    cluster = make_cluster(agents=1, substrate={"metrics-listen": metrics})
    return cluster, f"http://{metrics}"


def test_orchestrate_answers_healthz_and_readyz_without_a_token(health_cluster):
    cluster, _ = health_cluster
    url = cluster.orchestrate.rest_url

    ready = readyz_until(url, lambda reply: reply.status_code == 200)
    alive = httpx.get(f"{url}/healthz", timeout=5)

    assert set(conditions(ready)) == {"store", "engine", "endpoints", "revocations"}
    assert all(c["ok"] for c in conditions(ready).values())
    assert alive.status_code == 200 and alive.json()["process"] == "orchestrate"


def test_substrate_is_ready_on_its_metrics_port_once_registered_and_streaming(health_cluster):
    _, agent = health_cluster

    ready = readyz_until(agent, lambda reply: reply.status_code == 200)

    assert ready.json()["process"] == "substrate"
    assert conditions(ready)["registered"]["ok"] and conditions(ready)["stream"]["ok"]


def test_substrate_is_not_ready_naming_its_stream_once_orchestrate_is_gone(health_cluster):
    cluster, agent = health_cluster
    readyz_until(agent, lambda reply: reply.status_code == 200)

    cluster.orchestrate.close()
    unready = readyz_until(agent, lambda reply: reply.status_code == 503)

    stream = conditions(unready)["stream"]
    assert not stream["ok"] and "the stream to 127.0.0.1:" in stream["message"]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs, unmounted afterwards."""
    mount = tmp_path / "data"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.fixture
def orchestrate_on_small_disk(
    tmp_path: Path, small_disk: Path, local_registry: LocalRegistry
) -> Iterator[tuple[InProcessOrchestrate, str]]:
    """Orchestrate whose SQLite store is on the small tmpfs; (it, an admin's token)."""
    config = cluster_config(tmp_path, local_registry.url, grpc_port=free_port())
    config["database"]["url"] = f"sqlite:///{small_disk / 'orchestrate.db'}"
    orchestrate = InProcessOrchestrate(config)
    try:
        _, token = orchestrate.call(
            lambda: orchestrate.service.create_account("disk-admin", admin=True)
        )
        yield orchestrate, token
    finally:
        orchestrate.close()


def test_a_submission_to_a_full_data_dir_answers_a_resource_exhausted_status_naming_it(
    orchestrate_on_small_disk, small_disk
):
    orchestrate, token = orchestrate_on_small_disk
    start = f"{orchestrate.rest_url}/v3/workflows"
    headers = {"Authorization": f"Bearer {token}"}
    filler = small_disk / "filler"
    with filler.open("wb", buffering=0) as out:
        for chunk in (1 << 16, 1 << 12, 1):
            try:
                while True:
                    out.write(b"\0" * chunk)
            except OSError:
                pass

    refused = httpx.post(start, json={"name": "wf", "rawSpecification": ONE_JOB}, headers=headers)
    filler.unlink()
    accepted = httpx.post(start, json={"name": "wf", "rawSpecification": ONE_JOB}, headers=headers)

    assert refused.status_code == 429, refused.text
    assert refused.json()["code"] == 8  # RESOURCE_EXHAUSTED
    assert f"the data directory {small_disk} is full" in refused.json()["message"]
    assert accepted.status_code == 200, accepted.text
