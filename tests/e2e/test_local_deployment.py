"""The README's main command: `fuzzball local up`, then hello-world, then `local down`.

The upstream hello-world names docker://alpine:latest; the configuration mirrors docker.io to a
registry on loopback that holds a busybox-based library/alpine:latest, as an air-gapped site
would, so the run needs no internet.
"""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from support.cluster import HELLO_WORLD
from support.local_deployment import fuzzball
from support.local_deployment import local_deployment as deployment


@pytest.fixture
def local_deployment(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    with deployment(tmp_path) as deployed:
        yield deployed


def test_local_up_runs_hello_world_and_local_down_stops_it(local_deployment):
    _, env = local_deployment
    up = fuzzball(env, "local", "up")
    assert up.returncode == 0, up.stdout + up.stderr
    assert "Fuzzball is up" in up.stdout
    assert "orchestrate log:" in up.stdout

    run = fuzzball(env, "workflow", "start", "--wait", "--logs", str(HELLO_WORLD))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Hello, world! Hostname" in run.stdout

    status = fuzzball(env, "local", "status", "-o", "json")
    assert '"running": true' in status.stdout

    down = fuzzball(env, "local", "down")
    assert down.returncode == 0
    assert "stopped substrate, orchestrate" in down.stdout
    after = fuzzball(env, "local", "status", "-o", "json")
    assert '"running": true' not in after.stdout


def test_local_up_writes_a_context_in_the_real_cli_format(local_deployment):
    _, env = local_deployment
    assert fuzzball(env, "local", "up").returncode == 0
    contexts = yaml.safe_load((Path(env["HOME"]) / ".config/fuzzball/config.yaml").read_text())
    assert contexts["activeContext"] == "local"
    (local,) = contexts["contexts"]
    assert local["address"].startswith("https://127.0.0.1:")
    assert local["auth"]["credentials"]["token"]
    assert local["auth"]["credentials"]["refreshToken"]
    assert local["oidcServerURL"] == f"{local['address']}/auth/realms/fuzzball"
    assert local["currentaccountid"] == local["accounts"][0]["accountid"]


def test_local_up_serves_the_api_over_tls_with_the_ca_it_names_in_the_context(
    local_deployment, tmp_path
):
    _, env = local_deployment
    assert fuzzball(env, "local", "up").returncode == 0
    contexts = yaml.safe_load((Path(env["HOME"]) / ".config/fuzzball/config.yaml").read_text())
    (local,) = contexts["contexts"]
    assert local["cafile"] == str(tmp_path / "data/local/tls/ca.crt")
    trust = ssl.create_default_context(cafile=local["cafile"])
    trusting = httpx.get(f"{local['address']}/v3/version", verify=trust, timeout=10)
    assert trusting.status_code == 200
    assert trusting.headers["Strict-Transport-Security"].startswith("max-age=")
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(f"{local['address']}/v3/version", timeout=10)


def test_local_up_serves_plaintext_when_the_configuration_says_so(local_deployment):
    config, env = local_deployment
    document = yaml.safe_load(config.read_text())
    config.write_text(yaml.safe_dump({**document, "tls": {"plaintext": True}}))
    up = fuzzball(env, "local", "up")
    assert up.returncode == 0, up.stdout + up.stderr
    contexts = yaml.safe_load((Path(env["HOME"]) / ".config/fuzzball/config.yaml").read_text())
    (local,) = contexts["contexts"]
    assert local["address"].startswith("http://127.0.0.1:")
    assert "cafile" not in local
    listed = fuzzball(env, "workflow", "list")
    assert listed.returncode == 0, listed.stderr


def test_local_up_twice_is_harmless(local_deployment):
    _, env = local_deployment
    assert fuzzball(env, "local", "up").returncode == 0
    again = fuzzball(env, "local", "up")
    assert again.returncode == 0, again.stderr
    nodes = fuzzball(env, "node", "list", "-o", "json")
    assert nodes.stdout.count('"local-node"') == 1


def test_local_up_tells_each_step_on_stderr_while_it_waits(local_deployment):
    _, env = local_deployment
    up = fuzzball(env, "local", "up")
    assert up.returncode == 0, up.stderr
    assert "starting orchestrate (log: " in up.stderr
    assert "starting substrate (log: " in up.stderr
    assert "waiting: " in up.stderr  # nothing answers the moment the processes start
    again = fuzzball(env, "local", "up")
    assert "orchestrate is already running (pid " in again.stderr
    assert "Fuzzball is up" not in up.stderr  # the result stays on stdout


def test_local_up_signs_the_cli_in_as_the_owner_who_can_log_in_again(local_deployment, tmp_path):
    _, env = local_deployment
    up = fuzzball(env, "local", "up")
    assert up.returncode == 0, up.stdout + up.stderr
    password = (tmp_path / "data/local/owner.password").read_text().strip()
    assert "Signed in as admin@local, owner of organization 'local'" in up.stdout
    assert password in up.stdout  # shown once
    assert "fuzzball admin member add" in up.stdout
    again = fuzzball(env, "local", "up")
    assert again.returncode == 0, again.stdout + again.stderr
    assert password not in again.stdout
    login = fuzzball(env, "context", "login", "--username", "admin@local", "--password", password)
    assert login.returncode == 0, login.stdout + login.stderr
    shown = fuzzball(env, "context", "token")
    assert shown.stdout.strip() == context_token(env)


def context_token(env: dict[str, str]) -> str:
    contexts = yaml.safe_load((Path(env["HOME"]) / ".config/fuzzball/config.yaml").read_text())
    (local,) = contexts["contexts"]
    return local["auth"]["credentials"]["token"]


def test_local_up_again_reuses_its_admin_token(local_deployment):
    _, env = local_deployment
    assert fuzzball(env, "local", "up").returncode == 0
    first = context_token(env)
    assert fuzzball(env, "local", "down").returncode == 0
    assert fuzzball(env, "local", "up").returncode == 0
    assert context_token(env) == first


def test_local_up_keeps_its_data_readable_by_root_only(local_deployment, tmp_path):
    _, env = local_deployment
    assert fuzzball(env, "local", "up").returncode == 0
    data = tmp_path / "data"
    private = [data / "orchestrate.db", data / "orchestrate.db-wal", data / "local/config.yaml"]
    private += [data / "local/admin.token", data / "local/orchestrate.log"]
    private += [data / "local/owner.password", data / "oidc/signing-key.pem"]
    private += [data / "local/tls/ca.key", data / "local/tls/server.key"]
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in private} == {
        p.name: "0o600" for p in private
    }
    assert [oct(d.stat().st_mode & 0o777) for d in (data, data / "local")] == ["0o700"] * 2


#: Runs ``local up``, SIGKILLs Orchestrate and leaves it a zombie, runs ``local up`` again, and
#: prints what it saw as JSON. It makes itself a child subreaper, so the deployment's processes
#: (orphaned when the first ``local up`` exits) become its children, and it never waits for
#: them: the killed Orchestrate stays a zombie, as under a parent that has not reaped it yet.
CRASH_AND_UP_AGAIN = textwrap.dedent(
    """
    import ctypes, json, os, signal, subprocess, sys, time
    from pathlib import Path

    PR_SET_CHILD_SUBREAPER = 36
    assert ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    fuzzball = [sys.executable, "-m", "fuzzball_core.cli"]
    first = subprocess.run([*fuzzball, "local", "up"], capture_output=True, text=True)
    assert first.returncode == 0, first.stdout + first.stderr
    status = subprocess.run([*fuzzball, "local", "status", "-o", "json"],
                            capture_output=True, text=True)
    crashed = json.loads(status.stdout)["orchestrate"]["pid"]
    os.kill(crashed, signal.SIGKILL)
    stat = Path(f"/proc/{crashed}/stat")
    while stat.read_text().rpartition(")")[2].split()[0] != "Z":
        time.sleep(0.01)
    again = subprocess.run([*fuzzball, "local", "up", "--timeout", "60"],
                           capture_output=True, text=True)
    status = subprocess.run([*fuzzball, "local", "status", "-o", "json"],
                            capture_output=True, text=True)
    print(json.dumps({
        "crashed": crashed,
        "crashed_state": stat.read_text().rpartition(")")[2].split()[0],
        "up_again": again.returncode,
        "up_again_output": again.stdout + again.stderr,
        "status": json.loads(status.stdout),
    }))
    """
)


def test_local_up_restarts_an_orchestrate_that_was_killed_and_left_a_zombie(local_deployment):
    _, env = local_deployment
    seen = subprocess.run(
        [sys.executable, "-c", CRASH_AND_UP_AGAIN],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert seen.returncode == 0, seen.stderr
    report = json.loads(seen.stdout)
    assert report["crashed_state"] == "Z"  # still unreaped when up ran
    assert report["up_again"] == 0, report["up_again_output"]
    orchestrate = report["status"]["orchestrate"]
    assert orchestrate["running"]
    assert orchestrate["pid"] != report["crashed"]
    workflows = fuzzball(env, "workflow", "list")
    assert workflows.returncode == 0, workflows.stderr


def test_local_up_after_a_crashed_substrate_returns_once_the_new_agent_is_ready(
    local_deployment,
):
    config, env = local_deployment
    assert fuzzball(env, "local", "up").returncode == 0
    crashed = json.loads(fuzzball(env, "local", "status", "-o", "json").stdout)["substrate"]
    os.kill(crashed["pid"], signal.SIGKILL)

    again = fuzzball(env, "local", "up")
    agent = yaml.safe_load(config.read_text())["substrate"]["metrics-listen"]
    readyz = httpx.get(f"http://{agent}/readyz", timeout=5)

    assert again.returncode == 0, again.stdout + again.stderr
    assert readyz.status_code == 200, readyz.text
    restarted = json.loads(fuzzball(env, "local", "status", "-o", "json").stdout)["substrate"]
    assert restarted["pid"] != crashed["pid"] and restarted["ready"] is True


def test_local_status_shows_each_process_conditions(local_deployment):
    _, env = local_deployment
    assert fuzzball(env, "local", "up").returncode == 0

    report = json.loads(fuzzball(env, "local", "status", "-o", "json").stdout)
    table = fuzzball(env, "local", "status").stdout

    assert {c["name"] for c in report["orchestrate"]["conditions"]} == {
        "store",
        "engine",
        "endpoints",
        "revocations",
    }
    substrate = {c["name"]: c["ok"] for c in report["substrate"]["conditions"]}
    assert substrate["registered"] and substrate["stream"] and report["substrate"]["ready"]
    assert "READY" in table.splitlines()[0] and "registered" in table
