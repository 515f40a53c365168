"""``fuzzball-federate`` as a process: accounts, then serving members' state over REST."""

from __future__ import annotations

import subprocess
import time

import httpx
import pytest
import yaml
from support.cluster import free_port
from support.federated_workflows import GPU
from support.federation_harness import trust_federate

from fuzzball_core.config import ConfigError, parse_config
from fuzzball_core.service.forwarded_identity import load_or_create_key
from fuzzball_core.store.private_files import private_directory
from fuzzball_federation.main import IDENTITY_KEY_FILE

FEDERATE_MAIN = "from fuzzball_federation.main import main; main()"


@pytest.fixture
def config_file(tmp_path, members):
    port = free_port()
    # the key the served Federate will sign with, made first so the members can trust it
    private_directory(tmp_path / "federate")
    trust_federate(members, load_or_create_key(tmp_path / "federate" / IDENTITY_KEY_FILE))
    data = {
        "data-dir": str(tmp_path / "federate"),
        "tls": {"plaintext": True},
        "federate": {
            "listen": f"127.0.0.1:{port}",
            "clusters": [
                {"name": m.name, "address": m.rest_url, "token": m.token} for m in members
            ],
        },
    }
    path = tmp_path / "federate.yaml"
    path.write_text(yaml.safe_dump(data))
    return path, f"http://127.0.0.1:{port}"


def _federate(config, *args, **kwargs):
    return subprocess.run(
        ["fuzzball-federate", "--config", str(config), *args],
        capture_output=True,
        text=True,
        timeout=60,
        **kwargs,
    )


def test_served_federate_routes_a_workflow_with_a_created_accounts_token(config_file):
    config, url = config_file
    created = _federate(config, "create-account", "alice", "--admin")
    assert created.returncode == 0, created.stderr
    token = created.stdout.strip()
    server = subprocess.Popen(
        ["fuzzball-federate", "--config", str(config), "serve"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        headers = {"Authorization": f"Bearer {token}"}
        deadline = time.monotonic() + 30
        while True:
            try:
                reply = httpx.get(f"{url}/v3/clusters", headers=headers)
                break
            except httpx.TransportError:
                assert server.poll() is None, server.stderr.read().decode()
                assert time.monotonic() < deadline, "fuzzball-federate never listened"
                time.sleep(0.1)
        # the Federate lists itself first (kind FEDERATE, local), then its members
        assert [c["name"] for c in reply.json()["clusters"]] == ["federate", "onprem", "aws"]
        started = httpx.post(
            f"{url}/v3/workflows", headers=headers, json={"rawSpecification": GPU, "name": "gpu"}
        )
        assert started.status_code == 200, started.text
        listed = httpx.get(f"{url}/v3/workflows", headers=headers).json()["workflows"]
        assert [w["id"] for w in listed] == [started.json()["id"]]
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_two_members_with_one_name_are_refused_at_start(config_file):
    config, _ = config_file
    data = yaml.safe_load(config.read_text())
    data["federate"]["clusters"][1]["name"] = "onprem"
    config.write_text(yaml.safe_dump(data))
    result = _federate(config, "create-account", "x")
    assert result.returncode == 2
    assert "federate.clusters[1].name: 'onprem' names two members" in result.stderr


def test_member_config_keys_are_checked_by_name():
    with pytest.raises(ConfigError, match=r"federate\.clusters\[0\]\.adress: unknown key"):
        parse_config({"federate": {"clusters": [{"name": "a", "adress": "x"}]}})
