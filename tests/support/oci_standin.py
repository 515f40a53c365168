"""A recorded-shape stand-in for OCI's Core Services API, for the ``oci`` provisioner's tests.

No emulator of OCI exists. This aiohttp server answers the calls the driver's SDK (the oci
package) makes, with the JSON shapes OCI documents and answers: ``LaunchInstance`` (honouring
``opc-retry-token``), ``GetInstance``, ``TerminateInstance`` and ``ListInstances`` (paged with
``opc-next-page``). Every request must carry an HTTP signature (``Authorization: Signature
...``) that verifies against the test's API key, as OCI requires. It is not OCI: it starts no
machines (the boot hook in :mod:`support.cloud_boot` does, from an instance's ``user_data``
metadata), checks no capacity and keeps everything in memory.

An instance reads PROVISIONING when launched and RUNNING from the next read on; a terminated
one reads TERMINATING once and TERMINATED after, and stays listed, as OCI's do for a while.
"""

from __future__ import annotations

import base64
import itertools
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from support.live_api import LoopThread

TENANCY = "ocid1.tenancy.oc1..aaaaaaaafuzzballtesttenancy"
USER = "ocid1.user.oc1..aaaaaaaafuzzballtestuser"
COMPARTMENT = "ocid1.compartment.oc1..aaaaaaaafuzzballtestcompartment"
FINGERPRINT = "12:34:56:78:9a:bc:de:f0:12:34:56:78:9a:bc:de:f0"
REGION = "us-ashburn-1"
#: instances per ListInstances page (small, so paging is exercised)
PAGE = 2


def _error(status: int, code: str, message: str) -> web.Response:
    return web.json_response(
        {"code": code, "message": message},
        status=status,
        headers={"opc-request-id": uuid.uuid4().hex},
    )


@dataclass
class _Instance:
    body: dict[str, Any]
    reads: int = 0
    terminated_reads: int | None = None


@dataclass
class OciStandIn:
    """The stand-in's state and its calls (``(method, path)`` in order)."""

    directory: Path
    calls: list[tuple[str, str]] = field(default_factory=list)
    instances: dict[str, _Instance] = field(default_factory=dict)
    retry_tokens: dict[str, str] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self._loop = LoopThread()
        self._runner = self._loop.run(self._start())

    async def _start(self) -> web.AppRunner:
        app = web.Application()
        app.router.add_post("/20160918/instances", self._launch)
        app.router.add_post("/20160918/instances/", self._launch)
        app.router.add_get("/20160918/instances", self._list)
        app.router.add_get("/20160918/instances/{id}", self._get)
        app.router.add_delete("/20160918/instances/{id}", self._terminate)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
        return runner

    # -- what tests use ------------------------------------------------------------------------

    def key_file(self) -> Path:
        """The API signing key (PEM) the driver signs with."""
        path = self.directory / "oci-api-key.pem"
        path.write_bytes(
            self.key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.TraditionalOpenSSL,
                serialization.NoEncryption(),
            )
        )
        path.chmod(0o600)
        return path

    def driver_config(self, key_file: Path, **more: Any) -> dict[str, Any]:
        """The oci provisioner's configuration for this stand-in."""
        return {
            "region": REGION,
            "tenancy": TENANCY,
            "user": USER,
            "fingerprint": FINGERPRINT,
            "key-file": str(key_file),
            "compartment-id": COMPARTMENT,
            "endpoint-url": self.url,
            **more,
        }

    def count(self, method: str, prefix: str = "/20160918/instances") -> int:
        """How many ``method`` requests reached a path starting with ``prefix``."""
        with self._lock:
            return sum(1 for m, p in self.calls if m == method and p.startswith(prefix))

    def user_data(self, instance_id: str) -> str:
        """An instance's ``user_data`` metadata, decoded as the instance's cloud-init would."""
        with self._lock:
            encoded = self.instances[instance_id].body["metadata"]["user_data"]
        return base64.b64decode(encoded).decode()

    def states(self) -> dict[str, str]:
        """Each instance's lifecycle state as the API would answer it now (not advancing it)."""
        with self._lock:
            return {key: self._state(i) for key, i in self.instances.items()}

    def close(self) -> None:
        self._loop.run(self._runner.cleanup())
        self._loop.stop()

    # -- the API -------------------------------------------------------------------------------

    def _state(self, instance: _Instance) -> str:
        if instance.terminated_reads is not None:
            return "TERMINATING" if instance.terminated_reads == 0 else "TERMINATED"
        return "PROVISIONING" if instance.reads == 0 else "RUNNING"

    def _signed(self, request: web.Request, body: bytes) -> bool:
        """Whether the request carries a valid OCI HTTP signature by the test's key."""
        header = request.headers.get("Authorization", "")
        if not header.startswith("Signature "):
            return False
        parts = dict(
            item.split("=", 1) for item in header[len("Signature ") :].split(",") if "=" in item
        )
        fields = {k.strip(): v.strip().strip('"') for k, v in parts.items()}
        if fields.get("keyId") != f"{TENANCY}/{USER}/{FINGERPRINT}":
            return False
        lines = []
        for name in fields.get("headers", "").split():
            if name == "(request-target)":
                target = request.path_qs
                lines.append(f"(request-target): {request.method.lower()} {target}")
            else:
                lines.append(f"{name}: {request.headers.get(name, '')}")
        try:
            self.key.public_key().verify(
                base64.b64decode(fields.get("signature", "")),
                "\n".join(lines).encode(),
                padding.PKCS1v15(),
                hashes.SHA256(),
            )
        except (InvalidSignature, ValueError):
            return False
        if body:
            return request.headers.get("x-content-sha256") == _sha256(body)
        return True

    async def _admit(self, request: web.Request) -> tuple[web.Response | None, bytes]:
        body = await request.read()
        with self._lock:
            self.calls.append((request.method, request.path))
        if not self._signed(request, body):
            return _error(
                401,
                "NotAuthenticated",
                "The required information to complete"
                " authentication was not provided or was incorrect.",
            ), body
        return None, body

    def _read(self, instance: _Instance) -> dict[str, Any]:
        state = self._state(instance)
        if instance.terminated_reads is not None:
            instance.terminated_reads += 1
        instance.reads += 1
        return {**instance.body, "lifecycleState": state}

    async def _launch(self, request: web.Request) -> web.Response:
        refused, raw = await self._admit(request)
        if refused is not None:
            return refused
        body = json.loads(raw)
        for required in ("availabilityDomain", "compartmentId", "shape", "sourceDetails"):
            if not body.get(required):
                return _error(400, "InvalidParameter", f"{required} may not be null")
        if body["compartmentId"] != COMPARTMENT:
            return _error(
                404,
                "NotAuthorizedOrNotFound",
                "Authorization failed or requested resource not found.",
            )
        token = request.headers.get("opc-retry-token", "")
        with self._lock:
            if token and token in self.retry_tokens:
                instance = self.instances[self.retry_tokens[token]]
                return web.json_response(self._read(instance))
            number = next(self._ids)
            instance_id = f"ocid1.instance.oc1.iad.standin{number:08d}"
            created = {
                **body,
                "id": instance_id,
                "region": "iad",
                "timeCreated": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
                "launchMode": "PARAVIRTUALIZED",
                "definedTags": {},
                "systemTags": {},
            }
            created.pop("createVnicDetails", None)
            created.pop("sourceDetails", None)
            created["sourceDetails"] = {
                "sourceType": "image",
                "imageId": body["sourceDetails"].get("imageId"),
            }
            instance = _Instance(created)
            self.instances[instance_id] = instance
            if token:
                self.retry_tokens[token] = instance_id
            answer = self._read(instance)
        return web.json_response(answer, headers={"etag": uuid.uuid4().hex})

    async def _get(self, request: web.Request) -> web.Response:
        refused, _ = await self._admit(request)
        if refused is not None:
            return refused
        with self._lock:
            instance = self.instances.get(request.match_info["id"])
            if instance is None:
                return _error(
                    404,
                    "NotAuthorizedOrNotFound",
                    "Authorization failed or requested resource not found.",
                )
            answer = self._read(instance)
        return web.json_response(answer, headers={"etag": uuid.uuid4().hex})

    async def _terminate(self, request: web.Request) -> web.Response:
        refused, _ = await self._admit(request)
        if refused is not None:
            return refused
        with self._lock:
            instance = self.instances.get(request.match_info["id"])
            if instance is None:
                return _error(
                    404,
                    "NotAuthorizedOrNotFound",
                    "Authorization failed or requested resource not found.",
                )
            if instance.terminated_reads is None:
                instance.terminated_reads = 0
        return web.Response(status=204, headers={"opc-request-id": uuid.uuid4().hex})

    async def _list(self, request: web.Request) -> web.Response:
        refused, _ = await self._admit(request)
        if refused is not None:
            return refused
        if request.query.get("compartmentId") != COMPARTMENT:
            return _error(
                404,
                "NotAuthorizedOrNotFound",
                "Authorization failed or requested resource not found.",
            )
        start = int(request.query.get("page") or 0)
        with self._lock:
            every = list(self.instances.values())
            page = [self._read(i) for i in every[start : start + PAGE]]
        headers = {"opc-request-id": uuid.uuid4().hex}
        if start + PAGE < len(every):
            headers["opc-next-page"] = str(start + PAGE)
        return web.json_response(page, headers=headers)


def _sha256(body: bytes) -> str:
    digest = hashes.Hash(hashes.SHA256())
    digest.update(body)
    return base64.b64encode(digest.finalize()).decode()
