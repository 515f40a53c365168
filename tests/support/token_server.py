"""A minimal Docker token service (the ``auth.token`` realm) for bearer-auth tests.

It checks HTTP basic credentials against one user, then issues an RS256 JWT granting the
requested repository scope, signed by a self-signed certificate the registry trusts through
``rootcertbundle`` (the certificate travels in the token's ``x5c`` header).
"""

from __future__ import annotations

import base64
import datetime
import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID

ISSUER = "fuzzball-test-token-issuer"
SERVICE = "fuzzball-test-registry"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class TokenServer:
    """Issues registry tokens to ``username``/``password`` on ``127.0.0.1`` (a free port)."""

    def __init__(self, workdir: Path, username: str, password: str) -> None:
        self.username = username
        self.password = password
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ISSUER)])
        now = datetime.datetime.now(datetime.UTC)
        self.certificate = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.cert_path = workdir / "token-signer.pem"
        self.cert_path.write_bytes(self.certificate.public_bytes(serialization.Encoding.PEM))
        #: tokens issued to requests (not those made by :meth:`issue` directly)
        self.issued = 0
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self.realm = f"http://127.0.0.1:{self._httpd.server_address[1]}/token"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def start(self) -> None:
        """Serve in a background thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stop serving."""
        self._httpd.shutdown()
        self._httpd.server_close()

    def issue(self, scope: str) -> str:
        """A signed token granting ``scope`` (``repository:NAME:ACTIONS``)."""
        header = {
            "typ": "JWT",
            "alg": "RS256",
            "x5c": [
                base64.b64encode(self.certificate.public_bytes(serialization.Encoding.DER)).decode()
            ],
        }
        now = int(time.time())
        access = []
        for item in scope.split():
            kind, name, actions = item.split(":")
            access.append({"type": kind, "name": name, "actions": actions.split(",")})
        claims = {
            "iss": ISSUER,
            "sub": self.username,
            "aud": SERVICE,
            "exp": now + 300,
            "nbf": now - 10,
            "iat": now,
            "jti": uuid.uuid4().hex,
            "access": access,
        }
        signing_input = (
            f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
        )
        signature = self.key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{_b64url(signature)}"

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                expected = base64.b64encode(f"{server.username}:{server.password}".encode())
                if self.headers.get("Authorization", "") != f"Basic {expected.decode()}":
                    self.send_response(401)
                    self.end_headers()
                    return
                query = parse_qs(urlparse(self.path).query)
                token = server.issue(" ".join(query.get("scope", [])))
                server.issued += 1
                body = json.dumps({"token": token, "access_token": token, "expires_in": 300})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body.encode())

            def log_message(self, format: str, *args: object) -> None:
                pass  # keep test output quiet

        return Handler
