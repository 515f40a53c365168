"""The ``tls`` section turned into what the servers and their clients hand to aiohttp, grpc
and httpx.

A serving process (Orchestrate's REST and gRPC, Federate's REST) serves with ``tls.cert-file``
and ``tls.key-file``, or in plaintext only when ``tls.plaintext: true`` says so; with neither
it refuses to start (:class:`~fuzzball_core.config.ConfigError`, exit 2) naming those keys.
A client (Substrate) trusts ``tls.ca-file``, or the system's roots without one, and verifies
the server's name against the certificate; ``tls.plaintext: true`` makes it dial plaintext.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

import grpc

from fuzzball_core.config import ConfigError, TlsConfig

#: what the refusal to serve without TLS says to do
_NEITHER = (
    "tls: no certificate to serve with: set tls.cert-file and tls.key-file (the CA that"
    " signed them in tls.ca-file for the clients), or tls.plaintext: true to serve"
    " without TLS"
)


@dataclass(frozen=True)
class ServingSecurity:
    """How a process serves: both ``None`` in plaintext (said so by the configuration)."""

    #: for aiohttp's ``TCPSite(ssl_context=...)``
    ssl_context: ssl.SSLContext | None
    #: for grpc's ``server.add_secure_port``
    grpc_credentials: grpc.ServerCredentials | None

    @property
    def scheme(self) -> str:
        """``https`` or ``http``: how clients address the REST gateway."""
        return "http" if self.ssl_context is None else "https"


def _read(path: Path, key: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"tls.{key}: cannot read {path}: {exc.strerror}") from None


def serving_security(tls: TlsConfig) -> ServingSecurity:
    """The server side of ``tls``; ``ConfigError`` naming the keys when it says neither a
    certificate nor plaintext, or when the files cannot be read or do not match."""
    if tls.plaintext:
        return ServingSecurity(None, None)
    if tls.cert_file is None or tls.key_file is None:
        raise ConfigError(_NEITHER)
    chain, key = _read(tls.cert_file, "cert-file"), _read(tls.key_file, "key-file")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(tls.cert_file, tls.key_file)
    except (ssl.SSLError, ValueError) as exc:
        raise ConfigError(
            f"tls.cert-file, tls.key-file: {tls.cert_file} and {tls.key_file} are not a PEM"
            f" certificate and its key ({exc})"
        ) from None
    credentials = grpc.ssl_server_credentials([(key, chain)])
    return ServingSecurity(context, credentials)


def client_ssl_context(ca_file: Path | str | None) -> ssl.SSLContext:
    """A verifying client context trusting ``ca_file`` (the system's roots when None);
    ``ConfigError`` naming the file when it holds no certificate."""
    if ca_file is None:
        return ssl.create_default_context()
    try:
        return ssl.create_default_context(cafile=str(ca_file))
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"CA file {ca_file}: not readable PEM certificates ({exc})") from None


def grpc_channel_credentials(tls: TlsConfig) -> grpc.ChannelCredentials | None:
    """What a client dials a server of this configuration with: None for plaintext, else
    TLS trusting ``tls.ca-file`` (the system's roots without it)."""
    if tls.plaintext:
        return None
    roots = _read(tls.ca_file, "ca-file") if tls.ca_file is not None else None
    return grpc.ssl_channel_credentials(root_certificates=roots)
