"""The Federate test harness: two real Orchestrate clusters on loopback, a Federate in front.

Each member is the real SQL Orchestrate service (SQLite, engine, scripted nodes: see
``tests/support/sql_stack.py``) behind its real REST gateway, on its own event loop. ``onprem``
has one small node with two GPUs; ``aws`` has two large CPU-only nodes. Federate runs its
own gateway on a third loop (its calls to members block, as in the real process) and
reaches the members over HTTP with the tokens of their ``federate`` accounts (administrators
there, so that Federate can ask for nodes to route by). Each member trusts the Federate's key
(``trust_federate``): Federate's calls for a user carry that user's identity, and the member
acts with only the permissions both hold.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fuzzball_core.client import FuzzballClient
from fuzzball_core.config import parse_config
from fuzzball_core.drivers import Router
from fuzzball_core.orchestrate.cluster_registration_routes import (
    ClusterRegistration,
    cluster_registration_routes,
)
from fuzzball_core.orchestrate.storage_routes import storage_routes
from fuzzball_core.plugins import get_registry
from fuzzball_core.service.forwarded_identity import TrustedFederate, TrustedFederates
from fuzzball_federation.failover import Failover
from fuzzball_federation.main import build, build_app, serve
from fuzzball_federation.routers.fit import FitRouter
from fuzzball_federation.service import FederateService
from support.live_api import LoopThread, start_servers
from support.ports import free_port
from support.sql_stack import SqlStack

GIB = 1024**3


@dataclass
class MemberCluster:
    """One running Orchestrate: its service (with node controls), REST URL and loop."""

    name: str
    stack: SqlStack
    rest_url: str
    token: str
    loop: LoopThread
    _servers: Any

    @property
    def grpc_target(self) -> str:
        """The member's gRPC client API."""
        return str(self._servers.grpc_target)

    def close(self) -> None:
        self.loop.run(self._servers.close())
        self.stack.close()
        self.loop.stop()


def start_member(directory: Path, name: str, nodes: list[dict[str, Any]]) -> MemberCluster:
    """A real Orchestrate on loopback with scripted ``nodes`` and a ``federate`` account; it
    serves ``/admin/cluster/registration/configuration:generate`` and the storage routes
    (``/storage-classes``, ``/volumes``) as Orchestrate does."""
    loop = LoopThread()
    stack = SqlStack(loop, directory / f"{name}.db")
    _, token = stack.create_account("federate", kind="federate")
    for node in nodes:
        stack.add_node(**node)
    service = stack.service
    # its own trust: registration adds to it, and no other service shares it
    service.trusted_federates = TrustedFederates(())
    registration = ClusterRegistration(
        service.sessions, service.accounts, lambda: service.trusted_federates, name=name
    )
    routes = [cluster_registration_routes(registration), storage_routes(service.engine)]
    servers = loop.run(start_servers(service, extra_routes=routes))
    return MemberCluster(name, stack, servers.rest_url, token, loop, servers)


@dataclass
class Federation:
    """Federate's service and REST URL, a user's token, and the members by name."""

    service: FederateService
    rest_url: str
    token: str
    members: dict[str, Any]
    _loop: LoopThread
    _runner: web.AppRunner
    _clients: list[FuzzballClient] = field(default_factory=list)

    def client(self, token: str | None = None) -> FuzzballClient:
        """A REST client of Federate (as the user unless another token is given)."""
        client = FuzzballClient(f"{self.rest_url}/v3", token or self.token, timeout=30)
        self._clients.append(client)
        return client

    @property
    def who(self) -> Any:
        return self.service.authenticate(self.token)

    def close(self) -> None:
        for client in self._clients:
            client.close()
        self._loop.run(self._runner.cleanup())
        self._loop.stop()
        self.service.close()


class Reachable(Protocol):
    """What Federate needs of a member: its name, REST URL and an account's token."""

    name: str
    rest_url: str
    token: str


def trust_federate(members: Sequence[Any], key: Ed25519PrivateKey, name: str = "federate") -> None:
    """Make every member served in this process (a ``stack``'s or a ``service``'s) trust
    the identities the Federate ``name`` signs with ``key`` (as its
    ``orchestrate.trusted-federates`` would)."""
    trusted = TrustedFederates([TrustedFederate(name, key.public_key())])
    for member in members:
        stack = getattr(member, "stack", None)
        service = stack.service if stack is not None else getattr(member, "service", None)
        if service is not None:
            service.trusted_federates = trusted


def start_federation(
    directory: Path,
    members: Sequence[Reachable],
    *,
    extra_clusters: list[dict[str, Any]] = (),
    router: Router | None = None,
    registry: Any = None,
    admin: bool = False,
    name: str = "federate",
) -> Federation:
    """Federate ``name`` over ``members`` (plus ``extra_clusters`` configs) with its gateway
    up; the user's account (``token``) is an administrator's with ``admin``."""
    clusters = [
        {"name": m.name, "address": m.rest_url, "token": m.token, "labels": {"site": m.name}}
        for m in members
    ]
    config = parse_config(
        {
            "data-dir": str(directory / "federate"),
            "federate": {
                "clusters": [*clusters, *extra_clusters],
                "member-timeout": 5,
                "name": name,
            },
        }
    )
    service = build(config, router or FitRouter({}), registry)
    assert service.signer is not None
    trust_federate(members, service.signer.key, name)
    _, token = service.create_account("alice", admin=admin)
    loop = LoopThread()

    async def start() -> tuple[web.AppRunner, str]:
        runner = web.AppRunner(build_app(service))
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        host, port = runner.addresses[0][:2]
        return runner, f"http://{host}:{port}"

    runner, url = loop.run(start())
    return Federation(service, url, token, {m.name: m for m in members}, loop, runner)


@dataclass
class ServedFederation:
    """``fuzzball-federate serve``'s own coroutine (:func:`fuzzball_federation.main.serve`:
    the gateway, the member poll and failover loops) on a loop of this process, with no
    configured member: members join by registration. ``admin_token`` is an administrator's,
    ``user_token`` a plain user's."""

    service: FederateService
    rest_url: str
    admin_token: str
    user_token: str
    _loop: LoopThread
    _stop: asyncio.Event
    _serving: concurrent.futures.Future[None]

    def close(self) -> None:
        self._loop.loop.call_soon_threadsafe(self._stop.set)
        try:
            self._serving.result(30)
        finally:
            self._loop.stop()


def serve_federation(
    directory: Path, *, name: str = "federate", failover_grace: float = 3.0, poll: float = 1.0
) -> ServedFederation:
    """A Federate named ``name`` serving on a free loopback port, its failover loop re-routing
    after ``failover_grace`` seconds and its members polled every ``poll`` seconds."""
    port = free_port()
    config = parse_config(
        {
            "data-dir": str(directory / name),
            "tls": {"plaintext": True},
            "federate": {
                "listen": f"127.0.0.1:{port}",
                "name": name,
                "member-timeout": 5,
                "failover-grace": failover_grace,
            },
        }
    )
    registry = get_registry()
    service = build(config, FitRouter({}), registry)
    _, admin_token = service.create_account("root", admin=True)
    _, user_token = service.create_account("alice")
    loop = LoopThread()

    async def event() -> asyncio.Event:
        return asyncio.Event()

    stop = loop.run(event())
    failover = Failover(service, failover_grace, registry=registry)
    serving = asyncio.run_coroutine_threadsafe(
        serve(service, config.federate.listen, stop, poll=poll, failover=failover), loop.loop
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            pass
        if serving.done() or time.monotonic() > deadline:
            serving.result(0)  # raises what stopped it
            raise AssertionError("the Federate never answered /healthz")
        time.sleep(0.05)
    return ServedFederation(service, url, admin_token, user_token, loop, stop, serving)
