"""Secrets on a real cluster, as a client written for Fuzzball's API uses them, with a plain
HTTP client (httpx, none of this project's client code):

log in with the password grant at ``<issuer>/protocol/openid-connect/token``, exchange the
access token at ``/v3/accounts/{id}/token``, create a value secret (``PUT /v3/secrets``),
list it (no value), change it (``PATCH``), submit a v1 workflow ``{"name", "definition"}``
whose job reads ``secret://user/NAME`` from its env, and delete the secret. The job proves
it saw the value by printing its SHA-256 (so the value itself is printed nowhere), and every
event, log line, error body, describe output and process log is searched for the value.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from sqlalchemy import select
from support.cluster import Cluster
from support.private_registry import PRIVATE_IMAGE, start_private_registry
from support.registry_images import PRIVATE_PASSWORD, PRIVATE_USER
from support.registry_server import RegistryServer

from fuzzball_core.cli.main import cli
from fuzzball_core.service.oidc import REALM_PATH
from fuzzball_core.store.models import ApiToken, AuditEntry

pytestmark = [pytest.mark.root, pytest.mark.slow]

PASSWORD = "Correct-Horse-9-Battery"
FIRST_VALUE = "first-value-Zq81"
VALUE = "the-secret-value-7Hc2pX"


@dataclass
class Client:
    """A signed-in client: the API's base and an account's API token."""

    api: str
    token: str

    def call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.token}"}
        return httpx.request(method, f"{self.api}{path}", headers=headers, timeout=30, **kwargs)


def _sign_in(root: str, email: str) -> Client:
    """The password grant, then the account token exchange, as Fuzzball's clients do them."""
    login = httpx.post(
        f"{root}{REALM_PATH}/protocol/openid-connect/token",
        data={
            "client_id": "fuzzball-cli",
            "grant_type": "password",
            "username": email,
            "password": PASSWORD,
            "scope": "offline_access",
        },
    )
    assert login.status_code == 200, login.text
    bearer = {"Authorization": f"Bearer {login.json()['access_token']}"}
    accounts = httpx.get(f"{root}/v3/accounts", headers=bearer)
    assert accounts.status_code == 200, accounts.text
    account_id = accounts.json()["accounts"][0]["id"]
    exchanged = httpx.get(f"{root}/v3/accounts/{account_id}/token", headers=bearer)
    assert exchanged.status_code == 200, exchanged.text
    return Client(f"{root}/v3", exchanged.json()["token"])


def _job(command: str, env: list[str]) -> dict[str, Any]:
    return {
        "version": "v1",
        "jobs": {
            "show": {
                "image": {"uri": "docker://alpine:latest"},
                "env": env,
                "command": ["/bin/sh", "-c", command],
                "resource": {"cpu": {"cores": 1}, "memory": {"size": "256MiB"}},
            }
        },
    }


def _wait(client: Client, workflow_id: str, timeout: float = 90.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        reply = client.call("GET", f"/workflows/{workflow_id}")
        assert reply.status_code == 200, reply.text
        workflow = reply.json()
        if workflow.get("status", "").rsplit("_", 1)[-1] in ("FINISHED", "FAILED", "CANCELED"):
            return workflow
        assert time.monotonic() < deadline, f"workflow {workflow_id} did not end: {workflow}"
        time.sleep(0.2)


def _output(log: httpx.Response) -> str:
    """The job output a ``:log`` stream carries (each line's ``result.output``, base64)."""
    lines = [json.loads(line)["result"]["output"] for line in log.text.splitlines() if line]
    return "".join(base64.b64decode(data).decode() for data in lines)


def _cli(home: Path, address: str, token: str, workflow_id: str) -> list[str]:
    """What ``fuzzball workflow describe`` and ``events`` print of the workflow (the
    project's CLI, as its users read the workflow)."""
    env = {"XDG_CONFIG_HOME": str(home / "cli-home")}
    runner = CliRunner()
    made = runner.invoke(
        cli, ["context", "create", "e2e", "--address", address, "--token", token], env=env
    )
    assert made.exit_code == 0, made.output
    printed = []
    for args in (
        ["describe", workflow_id],
        ["describe", workflow_id, "-o", "json"],
        ["events", workflow_id],
    ):
        result = runner.invoke(cli, ["workflow", *args], env=env)
        assert result.exit_code == 0, result.output
        printed.append(result.output)
    return printed


@pytest.fixture(scope="module")
def person(cluster: Cluster) -> Iterator[str]:
    """An organization's owner who signs in with a password."""
    email = "grace@secrets.example"
    identity = cluster.orchestrate.service.identity
    cluster.orchestrate.call(
        lambda: identity.create_organization(
            "secrets-e2e", owner_email=email, owner_password=PASSWORD
        )
    )
    yield email


@pytest.fixture
def server_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """Everything Orchestrate (in this process) logs during the test."""
    caplog.set_level(logging.DEBUG)
    return caplog


def test_a_job_reads_a_user_secret_set_through_the_api_and_the_value_is_shown_nowhere(
    cluster: Cluster, person: str, server_log: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    client = _sign_in(cluster.orchestrate.rest_url, person)
    texts: list[str] = []  # everything a caller or operator sees, searched for the value

    created = client.call(
        "PUT",
        "/secrets",
        json={"name": "db-password", "scope": "SECRET_SCOPE_USER", "value": {"value": FIRST_VALUE}},
    )
    assert created.status_code == 200, created.text
    secret_id = created.json()["id"]
    listed = client.call("GET", "/secrets")
    assert [s["id"] for s in listed.json()["secrets"]] == [secret_id]
    assert FIRST_VALUE not in listed.text
    patched = client.call("PATCH", f"/secrets/{secret_id}", json={"value": {"value": VALUE}})
    assert patched.json() == {"id": secret_id}
    texts += [created.text, listed.text, patched.text]

    definition = _job(
        'printf %s "$DB_PASSWORD" | sha256sum; echo "token ${#FB_WORKFLOW_TOKEN}"',
        ["DB_PASSWORD=secret://user/db-password"],
    )
    started = client.call(
        "POST", "/workflows", json={"name": "reads-a-secret", "definition": definition}
    )
    assert started.status_code == 200, started.text
    workflow_id = started.json()["id"]
    workflow = _wait(client, workflow_id)
    output = _output(client.call("GET", f"/workflows/{workflow_id}:log"))
    events = client.call("GET", f"/workflows/{workflow_id}:events")
    texts += [started.text, str(workflow), output, events.text]

    assert workflow["status"].endswith("FINISHED"), workflow
    assert hashlib.sha256(VALUE.encode()).hexdigest() in output
    assert "token 43" in output  # the workflow's own token was handed to the job

    deleted = client.call("DELETE", f"/secrets/{secret_id}")
    assert deleted.json() == {"id": secret_id}
    assert client.call("GET", f"/secrets/{secret_id}").status_code == 404

    texts += [server_log.text, *(agent.log() for agent in cluster.agents)]
    stored = cluster.orchestrate.call(
        lambda: cluster.orchestrate.service.get_workflow(cluster.orchestrate.admin, workflow_id)
    )
    texts.append(repr(stored))
    texts += _cli(tmp_path, cluster.orchestrate.rest_url, client.token, workflow_id)
    for text in texts:
        assert VALUE not in text and FIRST_VALUE not in text


def test_a_missing_secret_fails_the_job_naming_the_reference_not_a_value(
    cluster: Cluster, person: str
) -> None:
    client = _sign_in(cluster.orchestrate.rest_url, person)
    definition = _job("echo never", ["DB_PASSWORD=secret://user/no-such-secret"])
    started = client.call("POST", "/workflows", json={"name": "missing", "definition": definition})
    workflow_id = started.json()["id"]
    workflow = _wait(client, workflow_id)
    events = client.call("GET", f"/workflows/{workflow_id}:events").text

    assert workflow["status"].endswith("FAILED"), workflow
    assert "jobs.show.env.DB_PASSWORD: secret://user/no-such-secret: no such secret" in events


def test_the_workflow_token_is_revoked_when_the_workflow_ends(
    cluster: Cluster, person: str
) -> None:
    client = _sign_in(cluster.orchestrate.rest_url, person)
    started = client.call(
        "POST", "/workflows", json={"name": "token", "definition": _job("true", [])}
    )
    workflow_id = started.json()["id"]
    _wait(client, workflow_id)
    sessions = cluster.orchestrate.orchestrate.engine.sessions

    def tokens() -> list[tuple[str, float | None]]:
        with sessions() as session:
            rows = session.scalars(select(ApiToken).where(ApiToken.workflow_id == workflow_id))
            return [(row.credential, row.revoked_at) for row in rows]

    issued = cluster.orchestrate.call(tokens)
    assert [credential for credential, _ in issued] == ["workflow"]
    assert all(revoked is not None for _, revoked in issued)


@pytest.fixture(scope="module")
def private_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryServer]:
    """Debian's docker-registry requiring basic authentication (htpasswd)."""
    server = start_private_registry(tmp_path_factory.mktemp("private-registry"))
    yield server
    server.kill()


def _private_job(registry: RegistryServer, secret: str | None) -> dict[str, Any]:
    job = _job("echo pulled from the private registry", [])
    image = job["jobs"]["show"]["image"]
    image["uri"] = f"docker://{registry.host}/{PRIVATE_IMAGE}"
    if secret is not None:
        image["secret"] = secret
    return job


def test_a_private_registry_image_is_pulled_with_an_image_secret(
    cluster: Cluster, person: str, private_registry: RegistryServer
) -> None:
    client = _sign_in(cluster.orchestrate.rest_url, person)
    created = client.call(
        "PUT",
        "/secrets",
        json={
            "name": "registry",
            "scope": "SECRET_SCOPE_USER",
            "image": {"username": PRIVATE_USER, "password": PRIVATE_PASSWORD},
        },
    )
    assert created.status_code == 200, created.text
    definition = _private_job(private_registry, "secret://user/registry")
    started = client.call("POST", "/workflows", json={"name": "private", "definition": definition})
    assert started.status_code == 200, started.text
    workflow_id = started.json()["id"]
    workflow = _wait(client, workflow_id)
    output = _output(client.call("GET", f"/workflows/{workflow_id}:log"))
    events = client.call("GET", f"/workflows/{workflow_id}:events").text

    assert workflow["status"].endswith("FINISHED"), events
    assert output == "pulled from the private registry\n"
    assert PRIVATE_PASSWORD not in events + str(workflow)


def test_a_private_registry_image_without_its_secret_is_refused_at_submission(
    cluster: Cluster, person: str, private_registry: RegistryServer
) -> None:
    client = _sign_in(cluster.orchestrate.rest_url, person)
    definition = _private_job(private_registry, None)
    started = client.call("POST", "/workflows", json={"name": "anon", "definition": definition})

    assert started.status_code == 400, started.text  # not 401: the caller's token is good
    assert started.json()["code"] == 9  # FAILED_PRECONDITION
    assert "requires credentials" in started.json()["message"]


class _BasicAuthFile(BaseHTTPRequestHandler):
    """Serves ``/data.txt`` to requests carrying the expected Basic credentials, 401 to
    others."""

    expected = "Basic " + base64.b64encode(b"fetcher:" + PASSWORD.encode()).decode()

    def do_GET(self) -> None:
        allowed = self.headers.get("Authorization") == self.expected
        body = b"behind basic auth\n" if allowed else b""
        self.send_response(200 if allowed else 401)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def protected_file() -> Iterator[str]:
    """The URL of a file a web server gives only with Basic credentials."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _BasicAuthFile)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/data.txt"
    server.shutdown()


def _ingress_job(url: str, secret: str) -> dict[str, Any]:
    definition = _job("cat /data/in.txt", [])
    definition["version"] = "v4"
    definition["volumes"] = {
        "data": {
            "reference": "volume://user/ephemeral",
            "ingress": [
                {"source": {"uri": url, "secret": secret}, "destination": {"uri": "file://in.txt"}}
            ],
        }
    }
    definition["jobs"]["show"]["mounts"] = {"/data": {"volume": "data"}}
    return definition


def _http_secret(client: Client, name: str, trusted: list[str]) -> None:
    body = {
        "name": name,
        "scope": "SECRET_SCOPE_USER",
        "http": {"username": "fetcher", "password": PASSWORD, "trustedDomains": trusted},
    }
    created = client.call("PUT", "/secrets", json=body)
    assert created.status_code == 200, created.text


def test_volume_ingress_is_fetched_with_an_http_secret(
    cluster: Cluster, person: str, protected_file: str
) -> None:
    client = _sign_in(cluster.orchestrate.rest_url, person)
    _http_secret(client, "files", ["127.0.0.1"])
    definition = _ingress_job(protected_file, "secret://user/files")
    started = client.call("POST", "/workflows", json={"name": "ingress", "definition": definition})
    assert started.status_code == 200, started.text
    workflow_id = started.json()["id"]
    workflow = _wait(client, workflow_id)
    events = client.call("GET", f"/workflows/{workflow_id}:events").text

    assert workflow["status"].endswith("FINISHED"), events
    assert _output(client.call("GET", f"/workflows/{workflow_id}:log")) == "behind basic auth\n"
    assert PASSWORD not in events + str(workflow)


def test_an_http_secret_is_never_sent_outside_its_trusted_domains(
    cluster: Cluster, person: str, protected_file: str
) -> None:
    client = _sign_in(cluster.orchestrate.rest_url, person)
    _http_secret(client, "elsewhere", ["files.example.org"])
    definition = _ingress_job(protected_file, "secret://user/elsewhere")
    started = client.call(
        "POST", "/workflows", json={"name": "untrusted", "definition": definition}
    )
    workflow = _wait(client, started.json()["id"])
    events = client.call("GET", f"/workflows/{started.json()['id']}:events").text

    assert workflow["status"].endswith("FAILED"), events
    assert "127.0.0.1" in events and "is not one of the secret's trusted domains" in events


def test_an_image_built_from_a_private_base_pulls_it_with_the_from_secret(
    cluster: Cluster, person: str, private_registry: RegistryServer
) -> None:
    client = _sign_in(cluster.orchestrate.rest_url, person)
    body = {
        "name": "base-registry",
        "scope": "SECRET_SCOPE_USER",
        "image": {"username": PRIVATE_USER, "password": PRIVATE_PASSWORD},
    }
    assert client.call("PUT", "/secrets", json=body).status_code == 200
    base = f"docker://{private_registry.host}/{PRIVATE_IMAGE}"
    definition = {
        "version": "v1",
        "images": {
            "private-tools": {
                "from": {"uri": base, "secret": "secret://user/base-registry"},
                "post": "echo built > /opt-built",
            }
        },
        "jobs": {
            "use": {
                "image": {"uri": "fuzzball://user/private-tools"},
                "command": ["/bin/cat", "/opt-built"],
            }
        },
    }
    started = client.call("POST", "/workflows", json={"name": "build", "definition": definition})
    assert started.status_code == 200, started.text
    workflow_id = started.json()["id"]
    workflow = _wait(client, workflow_id, timeout=180.0)
    events = client.call("GET", f"/workflows/{workflow_id}:events").text

    assert workflow["status"].endswith("FINISHED"), events
    assert _output(client.call("GET", f"/workflows/{workflow_id}:log")) == "built\n"
    assert PRIVATE_PASSWORD not in events
    # the build's node asked for the base's credentials itself (audited as a read)
    assert "images.private-tools.from.secret" in _secret_reads(cluster)


def _secret_reads(cluster: Cluster) -> list[str]:
    """The fields of every secret read in the audit log."""
    sessions = cluster.orchestrate.orchestrate.engine.sessions

    def read() -> list[str]:
        with sessions() as session:
            rows = session.scalars(select(AuditEntry).where(AuditEntry.action == "secret_read"))
            return [str((row.detail or {}).get("field", "")) for row in rows]

    return cluster.orchestrate.call(read)
