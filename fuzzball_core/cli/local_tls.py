"""TLS for ``fuzzball local up``: the deployment's own CA and Orchestrate's certificate.

Unless the user's configuration has a ``tls`` section of its own (their certificates, or
``plaintext: true``), ``up`` keeps a CA in ``<deployment>/tls`` (made on the first ``up``,
its key 0600) and a server certificate from it for every name the listen addresses are
reached by (127.0.0.1, ::1, localhost, this host's name, the listen hosts), issued again when
a listen host is new or it nears its end. The generated configuration then serves REST and
gRPC with it, Substrate trusts the CA for Orchestrate's gRPC and the object cache, and the
CLI's ``local`` context names the CA in ``cafile``.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

from fuzzball_core.certificates import CertificateAuthority, ensure_server_certificate, local_hosts
from fuzzball_core.config import FuzzballConfig
from fuzzball_core.tls import client_ssl_context

#: the deployment's TLS folder and the server certificate's files in it
TLS_DIRECTORY = "tls"
SERVER_CERT, SERVER_KEY = "server.crt", "server.key"


def _host(listen: str) -> str:
    return listen.rpartition(":")[0]


def secure_deployment(document: dict[str, Any], directory: Path) -> str:
    """Fill the merged configuration ``document``'s ``tls`` section from the deployment's CA
    (created in ``directory/tls`` when absent) unless the user wrote one; return the REST
    scheme the deployment serves (``https``, or ``http`` when the user chose plaintext)."""
    if "tls" in document:
        return "http" if (document["tls"] or {}).get("plaintext") else "https"
    defaults = FuzzballConfig().orchestrate
    orchestrate = document.get("orchestrate", {})
    listens = [
        orchestrate.get("grpc-listen", defaults.grpc_listen),
        orchestrate.get("rest-listen", defaults.rest_listen),
    ]
    folder = directory / TLS_DIRECTORY
    ca = CertificateAuthority.load_or_create(folder)
    server = ensure_server_certificate(
        ca, folder / SERVER_CERT, folder / SERVER_KEY, local_hosts(_host(x) for x in listens)
    )
    document["tls"] = {
        "ca-file": str(ca.cert_file),
        "cert-file": str(server.cert_file),
        "key-file": str(server.key_file),
    }
    return "https"


def rest_url(config: FuzzballConfig) -> str:
    """Orchestrate's REST root as the deployment serves it (``https://127.0.0.1:8080``)."""
    scheme = "http" if config.tls.plaintext else "https"
    return f"{scheme}://{config.orchestrate.rest_listen}"


def trust(config: FuzzballConfig) -> ssl.SSLContext:
    """What the CLI verifies the deployment's REST certificate with (its ``tls.ca-file``)."""
    return client_ssl_context(config.tls.ca_file)
