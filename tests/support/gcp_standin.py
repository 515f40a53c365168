"""A recorded-shape stand-in for the Compute Engine API, for the ``gcp`` provisioner's tests.

No emulator of Compute Engine exists. This aiohttp server answers the few calls the driver's
SDK (google-cloud-compute over REST) makes, with the JSON shapes the real API documents and
answers: ``instances.insert``, ``.get``, ``.delete``, ``instances.aggregatedList`` (with the
``labels.KEY = VALUE`` filters the driver sends; any other filter is refused, so the stand-in
never quietly answers a query it does not understand), ``zoneOperations.get``/``.wait`` and an
OAuth2 token endpoint for service-account credentials (it checks the JWT grant's signature
against the test's service-account key). It is not Compute Engine: it starts no machines (the
boot hook in :mod:`support.cloud_boot` does, from an instance's ``user-data`` metadata), checks
no quota and keeps everything in memory.

An instance reads PROVISIONING when inserted and RUNNING from the next read on; a deleted one
reads STOPPING once, then is gone (404), as Compute Engine's do a little more slowly.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jwt
from aiohttp import web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from support.live_api import LoopThread

API = "https://www.googleapis.com/compute/v1"
PROJECT = "fuzzball-test-project"
SERVICE_ACCOUNT = f"fuzzball-provisioner@{PROJECT}.iam.gserviceaccount.com"
_FILTER = re.compile(r'^\s*labels\.([a-z][a-z0-9_-]*)\s*=\s*"?([a-z0-9_-]*)"?\s*$')


def _error(status: int, reason: str, message: str) -> web.Response:
    body = {
        "error": {
            "code": status,
            "message": message,
            "errors": [{"message": message, "domain": "global", "reason": reason}],
        }
    }
    return web.json_response(body, status=status)


@dataclass
class _Instance:
    zone: str
    body: dict[str, Any]
    reads: int = 0
    deleted: bool = False


@dataclass
class GcpStandIn:
    """The stand-in's state and its calls (``(method, path)`` in order)."""

    directory: Path
    calls: list[tuple[str, str]] = field(default_factory=list)
    instances: dict[tuple[str, str], _Instance] = field(default_factory=dict)
    tokens: set[str] = field(default_factory=set)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(4_000_000_001))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self._loop = LoopThread()
        self._runner = self._loop.run(self._start())

    async def _start(self) -> web.AppRunner:
        app = web.Application()
        base = "/compute/v1/projects/{project}"
        app.router.add_post("/token", self._token)
        app.router.add_post(base + "/zones/{zone}/instances", self._insert)
        app.router.add_get(base + "/zones/{zone}/instances/{name}", self._get)
        app.router.add_delete(base + "/zones/{zone}/instances/{name}", self._delete)
        app.router.add_get(base + "/aggregated/instances", self._aggregated)
        app.router.add_get(base + "/zones/{zone}/operations/{operation}", self._operation)
        app.router.add_post(base + "/zones/{zone}/operations/{operation}/wait", self._operation)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        return runner

    # -- what tests use ------------------------------------------------------------------------

    def credentials_file(self) -> Path:
        """A service-account key file whose token URI is this stand-in's."""
        pem = self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
        document = {
            "type": "service_account",
            "project_id": PROJECT,
            "private_key_id": "0123456789abcdef",
            "private_key": pem,
            "client_email": SERVICE_ACCOUNT,
            "client_id": "100000000000000000001",
            "token_uri": f"{self.url}/token",
        }
        path = self.directory / "gcp-service-account.json"
        path.write_text(json.dumps(document))
        path.chmod(0o600)
        return path

    def driver_config(self, credentials: Path, **more: Any) -> dict[str, Any]:
        """The gcp provisioner's configuration for this stand-in."""
        return {
            "project": PROJECT,
            "credentials-file": str(credentials),
            "endpoint-url": self.url,
            **more,
        }

    def count(self, method: str, suffix: str = "") -> int:
        """How many ``method`` requests reached a path ending with ``suffix``."""
        with self._lock:
            return sum(1 for m, p in self.calls if m == method and p.endswith(suffix))

    def user_data(self, zone: str, name: str) -> str:
        """An instance's ``user-data`` metadata item, as the instance would read it."""
        with self._lock:
            items = self.instances[(zone, name)].body["metadata"]["items"]
        return str(next(item["value"] for item in items if item["key"] == "user-data"))

    def statuses(self) -> dict[tuple[str, str], str]:
        """Each instance's status as the API would answer it now (without advancing it)."""
        with self._lock:
            return {key: self._status(i) for key, i in self.instances.items() if not i.deleted}

    def close(self) -> None:
        self._loop.run(self._runner.cleanup())
        self._loop.stop()

    # -- the API -------------------------------------------------------------------------------

    def _status(self, instance: _Instance) -> str:
        if instance.deleted:
            return "STOPPING"
        return "PROVISIONING" if instance.reads == 0 else "RUNNING"

    def _authorized(self, request: web.Request) -> bool:
        """An access token this stand-in issued, or (what google-auth sends for a service
        account by default) a JWT the service account signed itself."""
        header = request.headers.get("Authorization", "")
        if not header.startswith("Bearer "):
            return False
        token = header[len("Bearer ") :]
        if token in self.tokens:
            return True
        try:
            claims = jwt.decode(
                token,
                self.key.public_key(),
                algorithms=["RS256"],
                options={"verify_aud": False},
            )
        except jwt.PyJWTError:
            return False
        return bool(claims.get("iss") == SERVICE_ACCOUNT)

    def _record(self, request: web.Request) -> web.Response | None:
        with self._lock:
            self.calls.append((request.method, request.path))
        if not self._authorized(request):
            return _error(401, "authError", "Request had invalid authentication credentials.")
        if request.match_info.get("project") != PROJECT:
            return _error(403, "forbidden", "Required 'compute.instances.list' permission")
        return None

    async def _token(self, request: web.Request) -> web.Response:
        form = await request.post()
        if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer":
            return web.json_response({"error": "unsupported_grant_type"}, status=400)
        try:
            claims = jwt.decode(
                str(form.get("assertion", "")),
                self.key.public_key(),
                algorithms=["RS256"],
                audience=f"{self.url}/token",
            )
        except jwt.PyJWTError as exc:
            return web.json_response(
                {"error": "invalid_grant", "error_description": str(exc)}, status=400
            )
        if claims.get("iss") != SERVICE_ACCOUNT:
            return web.json_response({"error": "invalid_grant"}, status=400)
        token = f"ya29.standin-{next(self._ids)}"
        with self._lock:
            self.tokens.add(token)
        return web.json_response(
            {"access_token": token, "token_type": "Bearer", "expires_in": 3600}
        )

    def _operation_body(self, zone: str, kind: str, target: str) -> dict[str, Any]:
        number = next(self._ids)
        now = time.strftime("%Y-%m-%dT%H:%M:%S.000-00:00", time.gmtime())
        return {
            "kind": "compute#operation",
            "id": str(number),
            "name": f"operation-{number}",
            "zone": f"{API}/projects/{PROJECT}/zones/{zone}",
            "operationType": kind,
            "targetLink": target,
            "status": "DONE",
            "progress": 100,
            "insertTime": now,
            "startTime": now,
            "endTime": now,
            "selfLink": f"{API}/projects/{PROJECT}/zones/{zone}/operations/operation-{number}",
        }

    async def _insert(self, request: web.Request) -> web.Response:
        refused = self._record(request)
        if refused is not None:
            return refused
        zone = request.match_info["zone"]
        body = await request.json()
        name = body.get("name", "")
        if not re.fullmatch(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?", name):
            return _error(400, "invalid", f"Invalid value for field 'resource.name': '{name}'.")
        for required in ("machineType", "disks", "networkInterfaces"):
            if not body.get(required):
                return _error(400, "required", f"Required field 'resource.{required}' not set.")
        link = f"{API}/projects/{PROJECT}/zones/{zone}/instances/{name}"
        with self._lock:
            existing = self.instances.get((zone, name))
            if existing is not None and not existing.deleted:
                return _error(409, "alreadyExists", f"The resource '{link}' already exists")
            number = next(self._ids)
            body.update(
                {
                    "kind": "compute#instance",
                    "id": str(number),
                    "zone": f"{API}/projects/{PROJECT}/zones/{zone}",
                    "selfLink": link,
                    "creationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%S.000-00:00"),
                }
            )
            for index, interface in enumerate(body["networkInterfaces"]):
                interface.setdefault("name", f"nic{index}")
                interface["networkIP"] = f"10.128.{(number >> 8) % 256}.{number % 250 + 2}"
            body.setdefault("metadata", {})["fingerprint"] = "c3RhbmRpbg=="
            self.instances[(zone, name)] = _Instance(zone, body)
        return web.json_response(self._operation_body(zone, "insert", link))

    def _read(self, zone: str, name: str) -> dict[str, Any] | None:
        with self._lock:
            instance = self.instances.get((zone, name))
            if instance is None:
                return None
            status = self._status(instance)
            if instance.deleted:
                # read once while stopping, then gone
                del self.instances[(zone, name)]
            instance.reads += 1
            return {**instance.body, "status": status}

    async def _get(self, request: web.Request) -> web.Response:
        refused = self._record(request)
        if refused is not None:
            return refused
        zone, name = request.match_info["zone"], request.match_info["name"]
        found = self._read(zone, name)
        if found is None:
            link = f"projects/{PROJECT}/zones/{zone}/instances/{name}"
            return _error(404, "notFound", f"The resource '{link}' was not found")
        return web.json_response(found)

    async def _delete(self, request: web.Request) -> web.Response:
        refused = self._record(request)
        if refused is not None:
            return refused
        zone, name = request.match_info["zone"], request.match_info["name"]
        link = f"{API}/projects/{PROJECT}/zones/{zone}/instances/{name}"
        with self._lock:
            instance = self.instances.get((zone, name))
            if instance is None:
                return _error(404, "notFound", f"The resource '{link}' was not found")
            instance.deleted = True
        return web.json_response(self._operation_body(zone, "delete", link))

    async def _aggregated(self, request: web.Request) -> web.Response:
        refused = self._record(request)
        if refused is not None:
            return refused
        wanted: dict[str, str] = {}
        text = request.query.get("filter", "")
        for clause in filter(None, (c.strip(" ()") for c in text.split(" AND "))):
            match = _FILTER.match(clause)
            if match is None:
                return _error(400, "invalid", f"Invalid value for field 'filter': '{text}'.")
            wanted[match.group(1)] = match.group(2)
        by_zone: dict[str, list[dict[str, Any]]] = {}
        with self._lock:
            keys = list(self.instances)
        for zone, name in keys:
            found = self._read(zone, name)
            if found is None:
                continue
            labels = found.get("labels") or {}
            if all(labels.get(k) == v for k, v in wanted.items()):
                by_zone.setdefault(f"zones/{zone}", []).append(found)
        items: dict[str, Any] = {z: {"instances": i} for z, i in by_zone.items()}
        empty = "zones/standin-empty-zone"
        items[empty] = {
            "warning": {
                "code": "NO_RESULTS_ON_PAGE",
                "message": f"There are no results for scope '{empty}' on this page.",
                "data": [{"key": "scope", "value": empty}],
            }
        }
        return web.json_response(
            {
                "kind": "compute#instanceAggregatedList",
                "id": f"projects/{PROJECT}/aggregated/instances",
                "items": items,
                "selfLink": f"{API}/projects/{PROJECT}/aggregated/instances",
            }
        )

    async def _operation(self, request: web.Request) -> web.Response:
        refused = self._record(request)
        if refused is not None:
            return refused
        zone = request.match_info["zone"]
        body = self._operation_body(zone, "insert", "")
        body["name"] = request.match_info["operation"]
        return web.json_response(body)
