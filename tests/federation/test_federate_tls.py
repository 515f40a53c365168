"""Federate's REST over TLS (``tls`` as Orchestrate reads it): served with the configured
certificate to clients trusting its CA, with Strict-Transport-Security; without a certificate
or ``tls.plaintext: true`` ``fuzzball-federate serve`` refuses to start. An https member is
verified against its ``ca-file``."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from support.cluster import InProcessOrchestrate, free_port
from support.live_api import LoopThread

from fuzzball_core import FUZZBALL_API_RELEASE
from fuzzball_core.api.rest import HSTS
from fuzzball_core.certificates import CertificateAuthority
from fuzzball_core.config import FederateMemberConfig, parse_config
from fuzzball_core.errors import Unavailable
from fuzzball_core.tls import client_ssl_context, serving_security
from fuzzball_federation.main import build, serve
from fuzzball_federation.members import Member
from fuzzball_federation.routers.fit import FitRouter


async def _event() -> asyncio.Event:
    return asyncio.Event()


@pytest.fixture
def ca(tmp_path: Path) -> CertificateAuthority:
    return CertificateAuthority.create(tmp_path / "ca")


@pytest.fixture
def federate_over_tls(tmp_path: Path, ca: CertificateAuthority) -> Iterator[str]:
    """Federate (no members) serving its REST over TLS; yields its https URL."""
    issued = ca.issue_server_certificate(
        tmp_path / "federate.crt", tmp_path / "federate.key", ["127.0.0.1"]
    )
    listen = f"127.0.0.1:{free_port()}"
    config = parse_config(
        {
            "data-dir": str(tmp_path / "federate"),
            "federate": {"listen": listen},
            "tls": {"cert-file": str(issued.cert_file), "key-file": str(issued.key_file)},
        }
    )
    service = build(config, FitRouter({}))
    loop = LoopThread()
    stop = loop.run(_event())
    serving = asyncio.run_coroutine_threadsafe(
        serve(service, listen, stop, security=serving_security(config.tls)), loop.loop
    )
    try:
        yield f"https://{listen}"
    finally:
        loop.loop.call_soon_threadsafe(stop.set)
        serving.result(15)
        loop.stop()


def _version(url: str, verify: object) -> httpx.Response:
    """``/v3/version`` once Federate listens (its site starts after the call returns)."""
    for _ in range(600):
        try:
            return httpx.get(f"{url}/v3/version", verify=verify)  # type: ignore[arg-type]
        except httpx.ConnectError as exc:
            if "CERTIFICATE_VERIFY_FAILED" in str(exc):
                raise
            time.sleep(0.05)
    raise AssertionError("Federate never listened")


def test_federate_serves_https_to_a_client_trusting_its_ca(
    federate_over_tls: str, ca: CertificateAuthority
) -> None:
    reply = _version(federate_over_tls, client_ssl_context(ca.cert_file))
    assert reply.status_code == 200
    assert reply.json()["version"] == FUZZBALL_API_RELEASE
    assert reply.headers["Strict-Transport-Security"] == HSTS
    assert reply.headers["X-Content-Type-Options"] == "nosniff"


def test_a_client_of_federate_trusting_another_ca_is_refused(
    federate_over_tls: str, tmp_path: Path
) -> None:
    stranger = CertificateAuthority.create(tmp_path / "stranger")
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        _version(federate_over_tls, client_ssl_context(stranger.cert_file))


def test_federate_without_tls_settings_refuses_to_start_with_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "federate.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "data-dir": str(tmp_path / "federate"),
                "federate": {"listen": f"127.0.0.1:{free_port()}"},
            }
        )
    )
    result = subprocess.run(
        ["fuzzball-federate", "--config", str(config), "serve"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert "cannot start: tls: no certificate to serve with" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.fixture
def https_member(tmp_path: Path, ca: CertificateAuthority) -> Iterator[str]:
    """An Orchestrate serving its REST over TLS with a certificate from ``ca``; its URL."""
    server = ca.issue_server_certificate(tmp_path / "m.crt", tmp_path / "m.key", ["127.0.0.1"])
    member = InProcessOrchestrate(
        {
            "data-dir": str(tmp_path / "member"),
            "orchestrate": {
                "grpc-listen": f"127.0.0.1:{free_port()}",
                "rest-listen": f"127.0.0.1:{free_port()}",
            },
            "tls": {"cert-file": str(server.cert_file), "key-file": str(server.key_file)},
        }
    )
    try:
        _version(member.rest_url, client_ssl_context(ca.cert_file))  # once it listens
        yield member.rest_url
    finally:
        member.close()


def test_federate_reaches_an_https_member_trusting_the_members_ca_file(
    https_member: str, ca: CertificateAuthority
) -> None:
    config = FederateMemberConfig(name="onprem", address=https_member, ca_file=ca.cert_file)
    member = Member(config, timeout=10)
    try:
        assert member.client().version() == FUZZBALL_API_RELEASE
    finally:
        member.close()


def test_federate_calls_an_https_member_without_its_ca_unreachable(https_member: str) -> None:
    member = Member(FederateMemberConfig(name="onprem", address=https_member), timeout=10)
    with pytest.raises(Unavailable, match=r"cluster onprem: unreachable.*CERTIFICATE_VERIFY"):
        member.client()
