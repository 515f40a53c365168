"""Run Debian's ``docker-registry`` (CNCF distribution) on loopback for tests and benchmarks.

Each instance gets its own configuration file, storage directory and port; it can be killed
and started again on the same port and storage (to cut a pull mid-layer), and its access log
(Apache combined format, one line per request, with the bytes each response carried) is kept
so tests can see what crossed the wire.
"""

from __future__ import annotations

import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from support.ports import free_port

REGISTRY_BINARY = "/usr/bin/docker-registry"
_ACCESS_LINE = re.compile(
    r'"(?P<method>[A-Z]+) (?P<path>\S+) HTTP/[\d.]+" (?P<status>\d{3}) (?P<bytes>\d+|-)'
)


@dataclass(frozen=True)
class AccessRecord:
    """One request the registry served."""

    method: str
    path: str
    status: int
    bytes_sent: int


@dataclass(frozen=True)
class TokenAuth:
    """Settings for the registry's bearer-token authentication (``auth.token``)."""

    realm: str
    service: str
    issuer: str
    root_cert_bundle: Path


class RegistryServer:
    """One ``docker-registry`` process bound to ``127.0.0.1:port``."""

    def __init__(
        self,
        workdir: Path,
        *,
        htpasswd: Path | None = None,
        token_auth: TokenAuth | None = None,
    ) -> None:
        self.workdir = workdir
        self.storage = workdir / "storage"
        self.storage.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.config_path = workdir / "config.yml"
        self.log_path = workdir / "registry.log"
        self._process: subprocess.Popen[bytes] | None = None
        self._write_config(htpasswd, token_auth)

    @property
    def host(self) -> str:
        """``127.0.0.1:PORT``: the registry part of an image reference."""
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """The base URL, e.g. for a mirror entry in the configuration."""
        return f"http://{self.host}"

    def _write_config(self, htpasswd: Path | None, token_auth: TokenAuth | None) -> None:
        auth = ""
        if htpasswd is not None:
            auth = f"auth:\n  htpasswd:\n    realm: fuzzball-test\n    path: {htpasswd}\n"
        elif token_auth is not None:
            auth = (
                "auth:\n  token:\n"
                f"    realm: {token_auth.realm}\n"
                f"    service: {token_auth.service}\n"
                f"    issuer: {token_auth.issuer}\n"
                f"    rootcertbundle: {token_auth.root_cert_bundle}\n"
            )
        self.config_path.write_text(
            "version: 0.1\n"
            "log:\n  level: error\n"
            "storage:\n"
            f"  filesystem:\n    rootdirectory: {self.storage}\n"
            "  delete:\n    enabled: true\n"
            "http:\n"
            f"  addr: 127.0.0.1:{self.port}\n"
            "  secret: fuzzball-test-upload-secret\n" + auth
        )

    def start(self, timeout: float = 15.0) -> None:
        """Start the process and wait until ``/v2/`` answers."""
        log = self.log_path.open("ab")
        self._process = subprocess.Popen(
            [REGISTRY_BINARY, "serve", str(self.config_path)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"docker-registry exited: {self.log_path.read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/v2/", timeout=1.0).status_code in (200, 401):
                    return
            except httpx.TransportError:
                time.sleep(0.05)
        raise RuntimeError(f"docker-registry did not come up on {self.host}")

    def kill(self) -> None:
        """Stop the process abruptly (SIGKILL), as a crash or a cut network would."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        self._process = None

    def access_log(self) -> list[AccessRecord]:
        """Every request served so far (across restarts), oldest first."""
        records = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            match = _ACCESS_LINE.search(line)
            if match:
                sent = match.group("bytes")
                records.append(
                    AccessRecord(
                        method=match.group("method"),
                        path=match.group("path"),
                        status=int(match.group("status")),
                        bytes_sent=0 if sent == "-" else int(sent),
                    )
                )
        return records

    def settled_access_log(self) -> list[AccessRecord]:
        """:meth:`access_log` once no line was added for 50 ms (the registry writes a
        request's line as it ends, which may be after its answer reached the client)."""
        log = self.access_log()
        while True:
            time.sleep(0.05)
            again = self.access_log()
            if len(again) == len(log):
                return again
            log = again

    def blob_gets(self, digest: str) -> list[AccessRecord]:
        """The successful GETs of one blob (full or ranged)."""
        return [
            r
            for r in self.access_log()
            if r.method == "GET" and r.path.endswith(f"/blobs/{digest}") and r.status in (200, 206)
        ]

    def blob_data_path(self, digest: str) -> Path:
        """Where the filesystem storage driver keeps a blob's bytes."""
        hex_part = digest.split(":", 1)[1]
        return self.storage / "docker/registry/v2/blobs/sha256" / hex_part[:2] / hex_part / "data"
