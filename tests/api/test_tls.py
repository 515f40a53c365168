"""Orchestrate served over TLS (fuzzball_core/tls.py, orchestrate/server.py ``serve``): REST and
gRPC with a certificate from a CA, verified by clients that trust that CA and refused by those
that do not; plaintext only when the configuration says so; the security headers; the
tokenless ``/version`` that clients probe."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import httpx
import pytest
import yaml
from click.testing import CliRunner, Result
from support.cluster import InProcessOrchestrate, free_port

from fuzzball_core import FUZZBALL_API_RELEASE
from fuzzball_core.api.rest import HSTS
from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.api.v1 import client_pb2_grpc as pb_grpc
from fuzzball_core.certificates import CertificateAuthority, local_hosts
from fuzzball_core.cli.main import cli
from fuzzball_core.client import FuzzballClient, discover_base_url
from fuzzball_core.config import ConfigError, parse_config
from fuzzball_core.errors import Unavailable
from fuzzball_core.tls import client_ssl_context, serving_security

ORCHESTRATE_MAIN = "from fuzzball_core.orchestrate.server import main; main()"


@dataclass
class Pki:
    """A CA with a server certificate for this machine, and a stranger CA."""

    ca: CertificateAuthority
    stranger: CertificateAuthority
    cert_file: Path
    key_file: Path

    @property
    def tls(self) -> dict[str, str]:
        return {
            "ca-file": str(self.ca.cert_file),
            "cert-file": str(self.cert_file),
            "key-file": str(self.key_file),
        }


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    ca = CertificateAuthority.create(tmp_path / "ca")
    stranger = CertificateAuthority.create(tmp_path / "stranger")
    server = ca.issue_server_certificate(
        tmp_path / "server.crt", tmp_path / "server.key", local_hosts()
    )
    return Pki(ca, stranger, server.cert_file, server.key_file)


def _config(tmp_path: Path, tls: dict[str, object]) -> dict[str, object]:
    return {
        "data-dir": str(tmp_path / "data"),
        "orchestrate": {
            "grpc-listen": f"127.0.0.1:{free_port()}",
            "rest-listen": f"127.0.0.1:{free_port()}",
            "node-token": "node-token",
        },
        "tls": tls,
    }


@dataclass
class Served:
    orchestrate: InProcessOrchestrate
    token: str

    @property
    def rest(self) -> str:
        return self.orchestrate.rest_url

    @property
    def grpc_target(self) -> str:
        return self.orchestrate.config.orchestrate.grpc_listen


def _listening(listen: str) -> None:
    """Return once ``listen`` (host:port) accepts connections: serve() starts in the
    background (a hang guard bounds the wait)."""
    host, _, port = listen.rpartition(":")
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection((host, int(port)), timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline, f"nothing listens on {listen}"
            time.sleep(0.02)


def _serve(config: dict[str, object]) -> Iterator[Served]:
    orchestrate = InProcessOrchestrate(config)
    try:
        _listening(orchestrate.config.orchestrate.grpc_listen)
        _listening(orchestrate.config.orchestrate.rest_listen)
        token = orchestrate.call(lambda: orchestrate.service.create_account("alice")[1])
        yield Served(orchestrate, token)
    finally:
        orchestrate.close()


@pytest.fixture
def over_tls(tmp_path: Path, pki: Pki) -> Iterator[Served]:
    yield from _serve(_config(tmp_path, pki.tls))


@pytest.fixture
def plaintext(tmp_path: Path) -> Iterator[Served]:
    yield from _serve(_config(tmp_path, {"plaintext": True}))


# -- REST -------------------------------------------------------------------------------------


def test_rest_is_served_over_https_to_a_client_trusting_the_ca(over_tls: Served, pki: Pki):
    assert over_tls.rest.startswith("https://")
    reply = httpx.get(
        f"{over_tls.rest}/v3/workflows",
        headers={"Authorization": f"Bearer {over_tls.token}"},
        verify=client_ssl_context(pki.ca.cert_file),
    )
    assert reply.status_code == 200


def test_a_rest_client_without_the_ca_is_refused_by_its_own_check(over_tls: Served):
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(f"{over_tls.rest}/v3/version")


def test_a_rest_client_trusting_another_ca_is_refused(over_tls: Served, pki: Pki):
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(f"{over_tls.rest}/v3/version", verify=client_ssl_context(pki.stranger.cert_file))


def test_plain_http_to_the_tls_port_gets_no_answer(over_tls: Served):
    plain = over_tls.rest.replace("https://", "http://")
    try:
        reply = httpx.get(f"{plain}/v3/version")
    except httpx.HTTPError:
        return  # the TLS server closed the connection: nothing was served
    assert reply.status_code == 400  # aiohttp's "this is a TLS port" answer, never the API
    assert FUZZBALL_API_RELEASE not in reply.text


def test_https_responses_carry_hsts_and_nosniff(over_tls: Served, pki: Pki):
    verify = client_ssl_context(pki.ca.cert_file)
    for path in ("/v3/version", "/v3/workflows", "/v3/no-such-route"):
        reply = httpx.get(f"{over_tls.rest}{path}", verify=verify)
        assert reply.headers["Strict-Transport-Security"] == HSTS, path
        assert reply.headers["X-Content-Type-Options"] == "nosniff", path


def test_the_cli_client_trusts_the_ca_it_is_given(over_tls: Served, pki: Pki):
    verify = client_ssl_context(pki.ca.cert_file)
    with FuzzballClient.connect(over_tls.rest, over_tls.token, verify=verify) as api:
        assert api.version() == FUZZBALL_API_RELEASE
        assert api.list_workflows() == []


def test_the_cli_client_without_the_ca_cannot_reach_the_api(over_tls: Served):
    with pytest.raises(Unavailable, match="CERTIFICATE_VERIFY_FAILED"):
        discover_base_url(over_tls.rest, over_tls.token)


def test_a_context_created_with_the_cafile_reaches_the_api_over_https(
    over_tls: Served, pki: Pki, tmp_path: Path
):
    env = {"XDG_CONFIG_HOME": str(tmp_path / "home"), "HOME": str(tmp_path / "home")}

    def fuzzball(*args: str) -> Result:
        return CliRunner().invoke(cli, list(args), env=env)

    created = fuzzball(
        "context",
        "create",
        "lab",
        "--address",
        over_tls.rest,
        "--token",
        over_tls.token,
        "--cafile",
        str(pki.ca.cert_file),
    )
    listed = fuzzball("workflow", "list", "-o", "json")

    assert created.exit_code == 0, created.output
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.output) == []


def test_a_context_without_the_cafile_is_refused_by_the_clis_own_check(
    over_tls: Served, tmp_path: Path
):
    env = {"XDG_CONFIG_HOME": str(tmp_path / "home"), "HOME": str(tmp_path / "home")}
    runner = CliRunner()
    runner.invoke(
        cli, ["context", "create", "lab", "--address", over_tls.rest, "--token", "t"], env=env
    )
    listed = runner.invoke(cli, ["workflow", "list"], env=env)
    assert isinstance(listed.exception, Unavailable)
    assert "CERTIFICATE_VERIFY_FAILED" in str(listed.exception)


# -- gRPC -------------------------------------------------------------------------------------


def _version(
    target: str, credentials: grpc.ChannelCredentials, token: str
) -> pb.GetVersionResponse:
    with grpc.secure_channel(target, credentials) as channel:
        return pb_grpc.VersionServiceStub(channel).GetVersion(
            pb.GetVersionRequest(), metadata=[("authorization", f"Bearer {token}")], timeout=10
        )


def test_grpc_is_served_over_tls_to_a_client_trusting_the_ca(over_tls: Served, pki: Pki):
    trusting = grpc.ssl_channel_credentials(root_certificates=pki.ca.pem)
    reply = _version(over_tls.grpc_target, trusting, over_tls.token)
    assert reply.version == FUZZBALL_API_RELEASE


def test_a_grpc_client_trusting_another_ca_is_refused(over_tls: Served, pki: Pki):
    stranger = grpc.ssl_channel_credentials(root_certificates=pki.stranger.pem)
    with pytest.raises(grpc.RpcError) as refused:
        _version(over_tls.grpc_target, stranger, over_tls.token)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE


def test_a_plaintext_grpc_client_is_refused(over_tls: Served):
    with (
        grpc.insecure_channel(over_tls.grpc_target) as channel,
        pytest.raises(grpc.RpcError) as refused,
    ):
        pb_grpc.VersionServiceStub(channel).GetVersion(pb.GetVersionRequest(), timeout=10)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE


# -- plaintext only when said -------------------------------------------------------------------


def test_plaintext_said_in_the_configuration_serves_http_without_hsts(plaintext: Served):
    reply = httpx.get(f"{plaintext.rest}/v3/version")
    assert reply.status_code == 200
    assert reply.headers["X-Content-Type-Options"] == "nosniff"
    assert "Strict-Transport-Security" not in reply.headers


def test_serving_with_neither_certificate_nor_plaintext_is_refused_naming_the_keys():
    with pytest.raises(ConfigError) as refused:
        serving_security(parse_config({}).tls)
    for key in ("tls.cert-file", "tls.key-file", "tls.plaintext"):
        assert key in refused.value.message


def test_plaintext_and_a_certificate_together_are_refused(pki: Pki):
    with pytest.raises(ConfigError, match="plaintext: true and cert-file"):
        parse_config({"tls": {"plaintext": True, **pki.tls}})


def test_a_certificate_without_its_key_is_refused_naming_both_keys(pki: Pki):
    with pytest.raises(ConfigError, match="cert-file and key-file go together"):
        parse_config({"tls": {"cert-file": str(pki.cert_file)}})


def test_a_key_that_is_not_the_certificates_is_refused_naming_both_files(pki: Pki, tmp_path):
    other = pki.ca.issue_server_certificate(tmp_path / "o.crt", tmp_path / "o.key", ["x"])
    config = parse_config(
        {"tls": {"cert-file": str(pki.cert_file), "key-file": str(other.key_file)}}
    )
    with pytest.raises(ConfigError, match=r"tls\.cert-file, tls\.key-file"):
        serving_security(config.tls)


def test_orchestrate_without_tls_settings_refuses_to_start_with_exit_2(tmp_path: Path):
    config = _config(tmp_path, {})
    del config["tls"]
    path = tmp_path / "orchestrate.yaml"
    path.write_text(yaml.safe_dump(config))
    result = subprocess.run(
        [sys.executable, "-c", ORCHESTRATE_MAIN, "--config", str(path), "serve"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert "cannot start: tls: no certificate to serve with" in result.stderr
    assert "tls.plaintext: true" in result.stderr
    assert "Traceback" not in result.stderr


# -- /version before login --------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/version", "/v3/version"])
def test_version_answers_without_a_token(plaintext: Served, path: str):
    reply = httpx.get(f"{plaintext.rest}{path}")
    assert reply.status_code == 200
    body = reply.json()
    assert body["version"] == FUZZBALL_API_RELEASE
    assert body["serverVersion"] == plaintext.orchestrate.service.version()


@pytest.mark.parametrize("version", ["v2", "v4", "v5", "v6"])
def test_other_api_versions_answer_404_not_401_so_a_probe_goes_on(plaintext: Served, version):
    reply = httpx.get(f"{plaintext.rest}/{version}/version")
    assert reply.status_code == 404
    assert reply.json()["code"] == 5


def test_the_openapi_document_says_version_needs_no_token(plaintext: Served):
    document = httpx.get(
        f"{plaintext.rest}/v3/openapi.json",
        headers={"Authorization": f"Bearer {plaintext.token}"},
    ).json()
    assert document["paths"]["/v3/version"]["get"]["security"] == []
    assert "security" not in document["paths"]["/v3/workflows"]["get"]


def test_a_client_probing_without_a_token_finds_v3(plaintext: Served):
    assert discover_base_url(plaintext.rest, None) == f"{plaintext.rest}/v3"
