"""What a user sees of real jobs, read with the ``fuzzball`` CLI: the traffic a job's
container sent and received, as the node's eBPF meters counted it, and the exit code of a
job that failed."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from support.cluster import Cluster

pytestmark = [pytest.mark.root, pytest.mark.slow]

FUZZBALL = [sys.executable, "-m", "fuzzball_core.cli"]

#: What the job downloads: large enough to stand out from the TCP handshake's few packets.
PAYLOAD = 300_000


class _QuietFiles(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def blob_url(tmp_path: Path) -> Iterator[str]:
    """The URL of a PAYLOAD-byte file served on the host's loopback (a job on the host
    network, the default, reaches it there)."""
    served = tmp_path / "served"
    served.mkdir()
    (served / "blob").write_bytes(os.urandom(PAYLOAD))
    server = ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_QuietFiles, directory=str(served))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/blob"
    server.shutdown()


@pytest.fixture
def fuzzball(cluster: Cluster, tmp_path: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """``fuzzball ARGS`` run as a user of the cluster, through its REST API."""
    orchestrate = cluster.orchestrate
    _, token = orchestrate.call(
        lambda: orchestrate.service.create_account(f"e2e-user-{tmp_path.name}")
    )
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config")}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [*FUZZBALL, *args], env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done

    run("context", "create", "e2e", "--address", orchestrate.rest_url, "--token", token)
    return run


def started(
    fuzzball: Callable[..., subprocess.CompletedProcess[str]], path: Path, spec: str
) -> str:
    path.write_text(spec)
    return json.loads(fuzzball("workflow", "start", str(path), "-o", "json").stdout)["id"]


def finished(cluster: Cluster, fuzzball, workflow_id: str) -> dict:
    """The workflow once it ended, as ``fuzzball workflow describe -o json`` shows it."""
    cluster.orchestrate.wait_for(workflow_id)
    return json.loads(fuzzball("workflow", "describe", workflow_id, "-o", "json").stdout)


def test_a_jobs_download_is_shown_as_its_stages_metered_traffic(
    cluster: Cluster, fuzzball, blob_url: str, tmp_path: Path
) -> None:
    workflow = f"""
version: v4
jobs:
  fetch:
    image: {{uri: docker://alpine:latest}}
    command: [busybox, wget, -qO, /dev/null, "{blob_url}"]
"""
    workflow_id = started(fuzzball, tmp_path / "fetch.yaml", workflow)

    shown = finished(cluster, fuzzball, workflow_id)

    fetch = next(stage for stage in shown["jobs"] if stage["name"] == "jobs.fetch")
    assert fetch["status"] == "STAGE_STATUS_FINISHED", fetch
    metering = {key: int(value) for key, value in fetch["details"]["metering"].items()}
    assert metering["ingressBytes"] >= PAYLOAD
    assert 0 < metering["egressBytes"] < PAYLOAD  # the request and the ACKs, not the file
    assert metering["ingressPackets"] > 0 and metering["egressPackets"] > 0


def test_a_failed_jobs_stage_failed_event_has_its_exit_code(
    cluster: Cluster, fuzzball, tmp_path: Path
) -> None:
    workflow = """
version: v4
jobs:
  fail:
    image: {uri: docker://alpine:latest}
    command: [/bin/sh, -c, "exit 3"]
"""
    workflow_id = started(fuzzball, tmp_path / "fail.yaml", workflow)
    cluster.orchestrate.wait_for(workflow_id)

    events = json.loads(fuzzball("workflow", "events", workflow_id, "-o", "json").stdout)

    (failed,) = [event for event in events if event["kind"] == "stage_failed"]
    assert failed["stageName"] == "jobs.fail"
    assert failed["data"]["exit_code"] == 3
