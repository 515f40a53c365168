"""``fuzzball local up --provisioner local``: the local deployment with no static node, a node
provisioned on request registering over the deployment's TLS, and ``local down`` deleting it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml
from support.ports import free_port

pytestmark = [pytest.mark.root, pytest.mark.slow]


def _fuzzball(tmp_path: Path, *args: str) -> str:
    env = {
        **os.environ,
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
        "FUZZBALL_CONFIG": str(tmp_path / "config.yaml"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "fuzzball_core.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture
def deployment(tmp_path: Path):
    if os.geteuid() != 0:
        pytest.skip("local up runs as root")
    rest = f"127.0.0.1:{free_port()}"
    (tmp_path / "config.yaml").write_text(
        yaml.safe_dump(
            {
                "data-dir": str(tmp_path / "data"),
                "orchestrate": {"grpc-listen": f"127.0.0.1:{free_port()}", "rest-listen": rest},
            }
        )
    )
    try:
        yield rest
    finally:
        _fuzzball(tmp_path, "local", "down")


def test_local_up_with_the_local_provisioner_starts_no_node_and_provisions_on_request(
    deployment, tmp_path
):
    said = _fuzzball(tmp_path, "local", "up", "--provisioner", "local", "--no-monitoring")
    assert "node provisioned on demand" in said
    local = tmp_path / "data" / "local"
    api = httpx.Client(
        base_url=f"https://{deployment}/v3",
        headers={"Authorization": f"Bearer {(local / 'admin.token').read_text().strip()}"},
        verify=False,  # the deployment's own CA; what is checked here is the node's dial
        timeout=30,
    )
    assert api.get("/nodes").json().get("nodes", []) == []
    reply = api.post("/admin/provisioner/instances", json={"definitionId": "local"})
    assert reply.status_code == 200, reply.text
    deadline = time.monotonic() + 90
    while not api.get("/nodes").json().get("nodes"):
        assert time.monotonic() < deadline, (local / "instances").iterdir()
        time.sleep(0.5)
    (node,) = api.get("/nodes").json()["nodes"]
    assert node["resource"]["annotations"]["fuzzball.provisioner/definition"] == "local"
    stopped = _fuzzball(tmp_path, "local", "down")
    assert f"provisioned node {node['hostName']}" in stopped
