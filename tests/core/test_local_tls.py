"""``fuzzball local up``'s TLS (fuzzball_core/cli/local_tls.py): the deployment's CA and server
certificate fill the generated configuration's ``tls`` section, are kept across ``up``s, and
give way to a ``tls`` section the user wrote."""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path

from cryptography import x509

from fuzzball_core.certificates import load_certificate
from fuzzball_core.cli.local_tls import rest_url, secure_deployment
from fuzzball_core.config import parse_config


def _sans(path: str) -> list[x509.GeneralName]:
    certificate = load_certificate(Path(path))
    return list(certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value)


def test_the_first_up_makes_a_ca_and_a_certificate_for_the_local_names(tmp_path: Path) -> None:
    document: dict = {"orchestrate": {"rest-listen": "127.0.0.1:8443"}}

    scheme = secure_deployment(document, tmp_path)

    assert scheme == "https"
    tls = document["tls"]
    assert tls["ca-file"] == str(tmp_path / "tls" / "ca.crt")
    names = _sans(tls["cert-file"])
    assert x509.IPAddress(ipaddress.ip_address("127.0.0.1")) in names
    assert x509.DNSName("localhost") in names
    assert x509.DNSName(socket.gethostname()) in names
    config = parse_config(document)
    assert rest_url(config) == "https://127.0.0.1:8443"


def test_a_second_up_keeps_the_ca_and_the_certificate(tmp_path: Path) -> None:
    first: dict = {}
    secure_deployment(first, tmp_path)
    ca = Path(first["tls"]["ca-file"]).read_bytes()
    certificate = Path(first["tls"]["cert-file"]).read_bytes()

    second: dict = {}
    secure_deployment(second, tmp_path)

    assert Path(second["tls"]["ca-file"]).read_bytes() == ca
    assert Path(second["tls"]["cert-file"]).read_bytes() == certificate


def test_a_new_listen_host_gets_a_certificate_naming_it(tmp_path: Path) -> None:
    secure_deployment({}, tmp_path)
    document: dict = {"orchestrate": {"grpc-listen": "10.20.30.40:50051"}}

    secure_deployment(document, tmp_path)

    assert x509.IPAddress(ipaddress.ip_address("10.20.30.40")) in _sans(
        document["tls"]["cert-file"]
    )


def test_the_users_plaintext_is_kept_and_served_over_http(tmp_path: Path) -> None:
    document: dict = {"tls": {"plaintext": True}}

    assert secure_deployment(document, tmp_path) == "http"
    assert document["tls"] == {"plaintext": True}
    assert not (tmp_path / "tls").exists()
    assert rest_url(parse_config(document)).startswith("http://")


def test_the_users_own_certificates_are_kept(tmp_path: Path) -> None:
    theirs = {"cert-file": "/etc/site/server.crt", "key-file": "/etc/site/server.key"}
    document: dict = {"tls": dict(theirs)}

    assert secure_deployment(document, tmp_path) == "https"
    assert document["tls"] == theirs
