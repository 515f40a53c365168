"""Orchestrate as it serves (``server.build`` and ``server.serve``) with two organizations'
resources, for the route isolation tests.

Organization ``acme``'s owner owns one of everything a by-ID route can name: a workflow in
their personal account, a group account, user and organization secrets, ``user`` and ``group``
object-cache images; the cluster has a node with a hold and a cluster secret. ``acme``'s
member (another account of the same organization) and ``globex``'s owner (another
organization) are the callers who must not see them.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from fuzzball_core.scheduling import Resources
from fuzzball_core.store.object_cache import CacheAddress
from fuzzball_core.vocabulary import AccountKind
from fuzzball_core.webui.session import CSRF_HEADER, SESSION_COOKIE, csrf_token
from support.cluster import InProcessOrchestrate, free_port
from support.live_api import HELLO
from support.tenants import Tenants, make_tenants

#: the node token of the isolation stack's Orchestrate (its object-cache node routes)
NODE_TOKEN = "isolation-node-token"


@dataclass(frozen=True)
class Owned:
    """The ids of what ``acme``'s owner (and the cluster) holds."""

    workflow: str
    group: str
    user_secret: str
    organization_secret: str
    cluster_secret: str
    node: str
    hold: str
    image: str
    #: a persistent endpoint of acme's owner (by id)
    endpoint: str
    #: acme owner's persistent volume, a storage class and a storage driver (by id)
    volume: str = ""
    storage_class: str = ""
    storage_driver: str = ""
    #: a provisioner definition (from the configuration) and an instance of it (by id)
    provisioner_definition: str = ""
    provisioner_instance: str = ""


class IsolationStack:
    """The served Orchestrate, its tenants, a monitoring token and what ``acme`` owns."""

    def __init__(self, directory: Path) -> None:
        rest = f"127.0.0.1:{free_port()}"
        self.orchestrate = InProcessOrchestrate(
            {
                "data-dir": str(directory / "data"),
                "database": {"url": f"sqlite:///{directory / 'orchestrate.db'}"},
                "orchestrate": {
                    "grpc-listen": f"127.0.0.1:{free_port()}",
                    "rest-listen": rest,
                    "node-token": NODE_TOKEN,
                },
                "tls": {"plaintext": True},
                # an on-prem machine whose power commands do nothing: instances to isolate
                "provisioner": {
                    "definitions": [
                        {
                            "id": "rack",
                            "driver": "onprem",
                            "cores": 4,
                            "memory": "8GiB",
                            "config": {
                                "state-dir": str(directory / "onprem"),
                                "inventory": [
                                    {"host": "rack-1", "power-on": "true", "power-off": "true"}
                                ],
                            },
                        }
                    ]
                },
            }
        )
        self.rest_url = f"http://{rest}/v3"
        self.grpc_target = self.orchestrate.config.orchestrate.grpc_listen
        service = self.orchestrate.service
        self.tenants: Tenants = self.orchestrate.call(lambda: make_tenants(service))
        self.monitoring = self.orchestrate.call(
            lambda: service.identity.create_service_account("monitor", AccountKind.MONITORING)[1]
        )
        try:
            self._wait_until_serving()
            self.owned = self._acme_owns()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        self.orchestrate.close()

    def _wait_until_serving(self) -> None:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{self.rest_url}/version", timeout=5)
                return
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def call(self, token: str, method: str, path: str, body: Any = None) -> httpx.Response:
        """``METHOD /v3PATH`` as the holder of ``token``."""
        return httpx.request(
            method,
            self.rest_url + path,
            headers={"Authorization": f"Bearer {token}"},
            json=body,
            timeout=30,
        )

    def page(self, token: str, method: str, path: str, body: Any = None) -> httpx.Response:
        """``METHOD PATH`` of the Web UI, signed in with ``token`` as the session cookie (and
        its CSRF token, so that a refusal is the page's, not the form's)."""
        return httpx.request(
            method,
            self.rest_url.removesuffix("/v3") + path,
            cookies={SESSION_COOKIE: token},
            headers={CSRF_HEADER: csrf_token(token)},
            timeout=30,
            follow_redirects=False,
        )

    def _created(self, token: str, path: str, body: dict[str, Any]) -> str:
        reply = self.call(token, "PUT" if "secrets" in path else "POST", path, body)
        assert reply.status_code == 200, reply.text
        return str(reply.json()["id"])

    def _acme_owns(self) -> Owned:
        owner, admin = self.tenants.acme_owner, self.tenants.admin_token
        service = self.orchestrate.service
        cache = service.object_cache
        assert cache is not None
        for scope in ("user", "group"):
            address = CacheAddress.checked(
                owner.account_id, scope, "tools", group=self.tenants.acme.id
            )
            self.orchestrate.call(lambda a=address: cache.store(a, [b"an EROFS image"]))
        who = self.orchestrate.call(lambda: service.authenticate(owner.token))
        # an image of the object cache: pinned without a registry
        spec = HELLO.replace("docker://alpine:latest", "fuzzball://user/tools")
        workflow = self.orchestrate.call(
            lambda: service.start_workflow(who, raw_specification=spec, name="mine")
        )
        node = self.orchestrate.call(
            lambda: self.orchestrate.orchestrate.engine.register_node(
                "node-1", Resources(4, 8 << 30, {}), {}
            )
        )
        hold = self._created(admin, f"/nodes/{node}/holds", {"effect": "cordon"})
        value = {"value": {"value": "not-for-you"}}
        return Owned(
            workflow=workflow,
            group=self._created(owner.token, "/accounts", {"name": "lab"}),
            user_secret=self._created(
                owner.token, "/secrets", {"name": "db", "scope": "SECRET_SCOPE_USER", **value}
            ),
            organization_secret=self._created(
                owner.token, "/organization/secrets", {"name": "shared", **value}
            ),
            cluster_secret=self._created(admin, "/admin/cluster/secrets", {"name": "lic", **value}),
            node=node,
            hold=hold,
            image="tools",
            endpoint=self._created(owner.token, "/endpoints", {"name": "notebook"}),
            volume=self._created(owner.token, "/volumes", {"volume": {"name": "results"}}),
            storage_class=self._created(
                admin,
                "/admin/storage-classes",
                {"class": {"name": "kept", "driver": "local", "properties": {"persistent": True}}},
            ),
            storage_driver=self._storage_driver(admin),
            provisioner_definition="rack",
            provisioner_instance=self.call(
                admin, "POST", "/admin/provisioner/instances", {"definitionId": "rack"}
            ).json()["ids"][0],
        )

    def _storage_driver(self, admin: str) -> str:
        """The builtin ``local`` driver's id."""
        reply = self.call(admin, "GET", "/admin/drivers")
        assert reply.status_code == 200, reply.text
        return next(d["id"] for d in reply.json()["drivers"] if d["driver"]["name"] == "local")


def absent_id() -> str:
    """An id nothing has."""
    return str(uuid.uuid4())
