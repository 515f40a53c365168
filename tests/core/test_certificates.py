"""The local certificate authority (fuzzball_core/certificates.py): a CA, server certificates
for the listen addresses, client certificates, keys 0600, and TLS handshakes that trust it."""

from __future__ import annotations

import ipaddress
import socket
import ssl
import stat
import threading
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from fuzzball_core.certificates import (
    CertificateAuthority,
    ensure_server_certificate,
    local_hosts,
)
from fuzzball_core.errors import FailedPrecondition


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _names(certificate: x509.Certificate) -> list[x509.GeneralName]:
    return list(certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value)


def test_a_new_ca_keeps_its_key_readable_by_its_owner_only(tmp_path: Path) -> None:
    ca = CertificateAuthority.create(tmp_path / "ca")
    assert _mode(tmp_path / "ca" / "ca.key") == 0o600
    assert _mode(ca.cert_file) == 0o644
    constraints = ca.certificate.extensions.get_extension_for_class(x509.BasicConstraints)
    assert constraints.value.ca


def test_a_ca_loads_back_from_its_files(tmp_path: Path) -> None:
    made = CertificateAuthority.create(tmp_path)
    again = CertificateAuthority.load_or_create(tmp_path)
    assert again.certificate == made.certificate
    assert again.pem == made.pem


def test_loading_a_ca_with_another_ca_key_names_the_key_file(tmp_path: Path) -> None:
    first = CertificateAuthority.create(tmp_path / "one")
    CertificateAuthority.create(tmp_path / "two")
    with pytest.raises(FailedPrecondition, match=r"two/ca\.key: not the key of"):
        CertificateAuthority.load(first.cert_file, tmp_path / "two" / "ca.key")


def test_loading_a_file_that_is_not_pem_names_it(tmp_path: Path) -> None:
    (tmp_path / "ca.crt").write_text("hello")
    (tmp_path / "ca.key").write_text("hello")
    with pytest.raises(FailedPrecondition, match=r"ca\.crt: not a PEM certificate"):
        CertificateAuthority.load_or_create(tmp_path)


def test_a_server_certificate_names_addresses_as_ip_sans_and_names_as_dns_sans(
    tmp_path: Path,
) -> None:
    ca = CertificateAuthority.create(tmp_path)
    issued = ca.issue_server_certificate(
        tmp_path / "server.crt", tmp_path / "server.key", ["127.0.0.1", "localhost", "::1"]
    )
    names = _names(issued.certificate)
    assert x509.IPAddress(ipaddress.ip_address("127.0.0.1")) in names
    assert x509.IPAddress(ipaddress.ip_address("::1")) in names
    assert x509.DNSName("localhost") in names
    usage = issued.certificate.extensions.get_extension_for_class(x509.ExtendedKeyUsage)
    assert list(usage.value) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert _mode(issued.key_file) == 0o600
    assert ca.issued(issued.certificate)


def test_local_hosts_name_loopback_this_host_and_the_listen_hosts_but_no_wildcard() -> None:
    hosts = local_hosts(["10.1.2.3", "0.0.0.0", "[::]"])
    assert hosts[:3] == ["127.0.0.1", "::1", "localhost"]
    assert socket.gethostname() in hosts
    assert "10.1.2.3" in hosts
    assert "0.0.0.0" not in hosts and "::" not in hosts


def test_a_client_certificate_carries_its_name_and_client_usage(tmp_path: Path) -> None:
    ca = CertificateAuthority.create(tmp_path)
    issued = ca.issue_client_certificate(tmp_path / "am.crt", tmp_path / "am.key", "alertmanager")
    subject = issued.certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    assert subject[0].value == "alertmanager"
    usage = issued.certificate.extensions.get_extension_for_class(x509.ExtendedKeyUsage)
    assert list(usage.value) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert _mode(issued.key_file) == 0o600


def test_another_cas_certificate_is_not_issued_by_this_one(tmp_path: Path) -> None:
    ours = CertificateAuthority.create(tmp_path / "ours")
    theirs = CertificateAuthority.create(tmp_path / "theirs")
    issued = theirs.issue_server_certificate(tmp_path / "s.crt", tmp_path / "s.key", ["localhost"])
    assert not ours.issued(issued.certificate)


def test_ensure_keeps_a_covering_certificate(tmp_path: Path) -> None:
    ca = CertificateAuthority.create(tmp_path)
    first = ensure_server_certificate(ca, tmp_path / "s.crt", tmp_path / "s.key", ["localhost"])
    again = ensure_server_certificate(ca, tmp_path / "s.crt", tmp_path / "s.key", ["localhost"])
    assert again.certificate == first.certificate


def test_ensure_issues_again_for_a_new_host(tmp_path: Path) -> None:
    ca = CertificateAuthority.create(tmp_path)
    first = ensure_server_certificate(ca, tmp_path / "s.crt", tmp_path / "s.key", ["localhost"])
    wider = ensure_server_certificate(
        ca, tmp_path / "s.crt", tmp_path / "s.key", ["localhost", "10.9.8.7"]
    )
    assert wider.certificate != first.certificate
    assert x509.IPAddress(ipaddress.ip_address("10.9.8.7")) in _names(wider.certificate)


def test_ensure_issues_again_when_another_ca_signed_the_certificate(tmp_path: Path) -> None:
    old = CertificateAuthority.create(tmp_path / "old")
    new = CertificateAuthority.create(tmp_path / "new")
    old.issue_server_certificate(tmp_path / "s.crt", tmp_path / "s.key", ["localhost"])
    issued = ensure_server_certificate(new, tmp_path / "s.crt", tmp_path / "s.key", ["localhost"])
    assert new.issued(issued.certificate)


def _handshake(
    server: ssl.SSLContext, client: ssl.SSLContext, host: str
) -> tuple[str | None, Exception | None]:
    """One TLS handshake over a socket pair; the client's peer name seen by the server,
    or the client's error."""
    left, right = socket.socketpair()
    seen: dict[str, object] = {}

    def serve() -> None:
        try:
            with server.wrap_socket(left, server_side=True) as tls:
                peer = tls.getpeercert()
                seen["peer"] = dict(x[0] for x in peer["subject"])["commonName"] if peer else None
        except (ssl.SSLError, OSError) as exc:
            seen["server_error"] = exc

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with client.wrap_socket(right, server_hostname=host):
            pass
        error = None
    except ssl.SSLError as exc:
        error = exc
        right.close()
    thread.join()
    return seen.get("peer"), error  # type: ignore[return-value]


def _server_context(ca: CertificateAuthority, tmp_path: Path) -> ssl.SSLContext:
    issued = ca.issue_server_certificate(tmp_path / "s.crt", tmp_path / "s.key", ["localhost"])
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(issued.cert_file, issued.key_file)
    return context


def test_a_client_trusting_the_ca_completes_a_handshake_with_its_server(tmp_path: Path) -> None:
    ca = CertificateAuthority.create(tmp_path / "ca")
    client = ssl.create_default_context(cafile=str(ca.cert_file))
    _, error = _handshake(_server_context(ca, tmp_path), client, "localhost")
    assert error is None


def test_a_client_trusting_another_ca_refuses_the_server(tmp_path: Path) -> None:
    ca = CertificateAuthority.create(tmp_path / "ca")
    other = CertificateAuthority.create(tmp_path / "other")
    client = ssl.create_default_context(cafile=str(other.cert_file))
    _, error = _handshake(_server_context(ca, tmp_path), client, "localhost")
    assert isinstance(error, ssl.SSLCertVerificationError)


def test_a_server_requiring_client_certificates_sees_the_issued_name(tmp_path: Path) -> None:
    ca = CertificateAuthority.create(tmp_path / "ca")
    server = _server_context(ca, tmp_path)
    server.verify_mode = ssl.CERT_REQUIRED
    server.load_verify_locations(cafile=str(ca.cert_file))
    issued = ca.issue_client_certificate(tmp_path / "c.crt", tmp_path / "c.key", "alertmanager")
    client = ssl.create_default_context(cafile=str(ca.cert_file))
    client.load_cert_chain(issued.cert_file, issued.key_file)
    peer, error = _handshake(server, client, "localhost")
    assert error is None
    assert peer == "alertmanager"
