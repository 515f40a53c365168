"""A small certificate authority: the local CA, the servers' and the clients' certificates.

``fuzzball local up`` makes one CA in its deployment directory and, from it, the certificate
Orchestrate serves REST and gRPC with; Substrate and the CLI trust that CA (``tls.ca-file``,
the CLI context's ``cafile``) instead of the system's roots. The same CA issues client
certificates for mutual TLS (an Alertmanager presenting one to the monitoring webhook).

Keys are ECDSA P-256, written 0600 from creation (never readable by another user, not even
for a moment); certificates are 0644. Everything is done with ``cryptography``: no openssl
command is run.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import socket
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from fuzzball_core.errors import FailedPrecondition

#: file names of the CA in a directory made by :meth:`CertificateAuthority.create`
CA_CERT_NAME, CA_KEY_NAME = "ca.crt", "ca.key"
#: how long the CA, a server's and a client's certificate are valid
CA_LIFETIME = datetime.timedelta(days=3650)
SERVER_LIFETIME = datetime.timedelta(days=397)
CLIENT_LIFETIME = datetime.timedelta(days=397)
#: a server certificate this close to its end is issued again by :func:`ensure_server_certificate`
RENEW_BEFORE = datetime.timedelta(days=30)
KEY_MODE, CERT_MODE = 0o600, 0o644

Host = ipaddress.IPv4Address | ipaddress.IPv6Address | str


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _write(path: Path, data: bytes, mode: int) -> None:
    """Write ``data`` to ``path`` atomically, created with ``mode`` (a key is never readable
    by others, not even between its creation and a chmod)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise FailedPrecondition(f"{what} {path}: cannot read it: {exc.strerror}") from None


def load_certificate(path: Path, what: str = "certificate") -> x509.Certificate:
    """The PEM certificate in ``path``; ``FailedPrecondition`` naming the file otherwise."""
    try:
        return x509.load_pem_x509_certificate(_read(path, what))
    except ValueError:
        raise FailedPrecondition(f"{what} {path}: not a PEM certificate") from None


def load_private_key(path: Path, what: str = "key") -> ec.EllipticCurvePrivateKey:
    """The unencrypted PEM EC private key in ``path``; ``FailedPrecondition`` otherwise."""
    try:
        key = serialization.load_pem_private_key(_read(path, what), password=None)
    except (ValueError, TypeError):
        raise FailedPrecondition(f"{what} {path}: not an unencrypted PEM private key") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise FailedPrecondition(f"{what} {path}: not an elliptic-curve key")
    return key


def _host_entry(host: Host) -> x509.GeneralName:
    """An IP SAN for an address, a DNS SAN for a name."""
    if isinstance(host, ipaddress.IPv4Address | ipaddress.IPv6Address):
        return x509.IPAddress(host)
    try:
        return x509.IPAddress(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        return x509.DNSName(host)


def local_hosts(extra: Iterable[str] = ()) -> list[str]:
    """The names a server on this machine is reached by: 127.0.0.1, ::1, localhost, this
    host's name (and its fully qualified one), plus ``extra`` (the hosts of the listen
    addresses; a wildcard such as 0.0.0.0 is no name and is left out)."""
    hosts = ["127.0.0.1", "::1", "localhost", socket.gethostname(), socket.getfqdn()]
    hosts += [h.strip("[]") for h in extra if h.strip("[]") not in ("", "0.0.0.0", "::")]
    return list(dict.fromkeys(h for h in hosts if h))


def _covers(certificate: x509.Certificate, hosts: Iterable[str]) -> bool:
    try:
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    present = set(names)
    return all(_host_entry(h) in present for h in hosts)


@dataclass(frozen=True)
class IssuedCertificate:
    """A certificate and its key, as written by the CA."""

    cert_file: Path
    key_file: Path
    certificate: x509.Certificate


@dataclass(frozen=True)
class CertificateAuthority:
    """A CA certificate and its key; issues server and client certificates."""

    certificate: x509.Certificate
    key: ec.EllipticCurvePrivateKey
    cert_file: Path

    @classmethod
    def create(
        cls,
        directory: Path,
        *,
        name: str = "Fuzzball local CA",
        lifetime: datetime.timedelta = CA_LIFETIME,
    ) -> CertificateAuthority:
        """A new CA written to ``directory`` (``ca.crt``, ``ca.key`` 0600); an existing one
        there is replaced."""
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = _now()
        certificate = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + lifetime)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
            .sign(key, hashes.SHA256())
        )
        cert_file = directory / CA_CERT_NAME
        _write(directory / CA_KEY_NAME, _key_pem(key), KEY_MODE)
        _write(cert_file, certificate.public_bytes(serialization.Encoding.PEM), CERT_MODE)
        return cls(certificate, key, cert_file)

    @classmethod
    def load(cls, cert_file: Path, key_file: Path) -> CertificateAuthority:
        """The CA in ``cert_file`` and ``key_file``; ``FailedPrecondition`` naming the file
        that is unreadable, not PEM, not a CA, or not the certificate's key."""
        certificate = load_certificate(cert_file, "CA certificate")
        key = load_private_key(key_file, "CA key")
        try:
            constraints = certificate.extensions.get_extension_for_class(x509.BasicConstraints)
        except x509.ExtensionNotFound:
            constraints = None
        if constraints is None or not constraints.value.ca:
            raise FailedPrecondition(f"CA certificate {cert_file}: not a CA certificate")
        if certificate.public_key() != key.public_key():
            raise FailedPrecondition(f"CA key {key_file}: not the key of {cert_file}")
        return cls(certificate, key, cert_file)

    @classmethod
    def load_or_create(cls, directory: Path) -> CertificateAuthority:
        """The CA kept in ``directory``, created there when it has none yet."""
        cert_file, key_file = directory / CA_CERT_NAME, directory / CA_KEY_NAME
        if cert_file.exists() or key_file.exists():
            return cls.load(cert_file, key_file)
        return cls.create(directory)

    @property
    def pem(self) -> bytes:
        """The CA certificate in PEM: what clients trust."""
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    def issued(self, certificate: x509.Certificate) -> bool:
        """Whether this CA signed ``certificate``."""
        if certificate.issuer != self.certificate.subject:
            return False
        try:
            certificate.verify_directly_issued_by(self.certificate)
        except (ValueError, TypeError, InvalidSignature):
            return False
        return True

    def _issue(
        self,
        cert_file: Path,
        key_file: Path,
        common_name: str,
        usage: x509.ObjectIdentifier,
        lifetime: datetime.timedelta,
        hosts: Iterable[Host] = (),
    ) -> IssuedCertificate:
        key = ec.generate_private_key(ec.SECP256R1())
        now = _now()
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(min(now + lifetime, self.certificate.not_valid_after_utc))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), False
            )
        )
        names = list(dict.fromkeys(_host_entry(h) for h in hosts))
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        certificate = builder.sign(self.key, hashes.SHA256())
        _write(key_file, _key_pem(key), KEY_MODE)
        _write(cert_file, certificate.public_bytes(serialization.Encoding.PEM), CERT_MODE)
        return IssuedCertificate(cert_file, key_file, certificate)

    def issue_server_certificate(
        self,
        cert_file: Path,
        key_file: Path,
        hosts: Iterable[Host],
        *,
        lifetime: datetime.timedelta = SERVER_LIFETIME,
    ) -> IssuedCertificate:
        """A server certificate for ``hosts`` (IP SANs for addresses, DNS SANs for names),
        written to ``cert_file`` and ``key_file`` (0600)."""
        hosts = list(hosts)
        if not hosts:
            raise FailedPrecondition("a server certificate needs at least one host name")
        return self._issue(
            cert_file, key_file, str(hosts[0]), ExtendedKeyUsageOID.SERVER_AUTH, lifetime, hosts
        )

    def issue_client_certificate(
        self,
        cert_file: Path,
        key_file: Path,
        name: str,
        *,
        lifetime: datetime.timedelta = CLIENT_LIFETIME,
    ) -> IssuedCertificate:
        """A client certificate whose subject's common name is ``name`` (what a server
        checking it sees), written to ``cert_file`` and ``key_file`` (0600)."""
        if not name.strip():
            raise FailedPrecondition("a client certificate needs a name")
        return self._issue(cert_file, key_file, name, ExtendedKeyUsageOID.CLIENT_AUTH, lifetime)


def ensure_server_certificate(
    ca: CertificateAuthority, cert_file: Path, key_file: Path, hosts: Iterable[str]
) -> IssuedCertificate:
    """The server certificate in ``cert_file``, issued again when it is missing, unreadable,
    not from ``ca``, missing one of ``hosts`` or within :data:`RENEW_BEFORE` of its end."""
    hosts = list(hosts)
    if cert_file.exists() and key_file.exists():
        try:
            certificate = load_certificate(cert_file)
            key = load_private_key(key_file)
        except FailedPrecondition:
            certificate = None
        if (
            certificate is not None
            and certificate.public_key() == key.public_key()
            and ca.issued(certificate)
            and _covers(certificate, hosts)
            and certificate.not_valid_after_utc - _now() > RENEW_BEFORE
        ):
            return IssuedCertificate(cert_file, key_file, certificate)
    return ca.issue_server_certificate(cert_file, key_file, hosts)
