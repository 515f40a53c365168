"""Real servers on loopback for the API and CLI tests.

An asyncio loop runs in a background thread (as Orchestrate's loop does) and hosts the aiohttp
REST gateway and the grpc.aio client API, both on 127.0.0.1 with a free port, over one
OrchestrateService. Tests talk to them with real HTTP and gRPC clients from the main thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
from aiohttp import web

from fuzzball_core.api.grpc_client import add_client_servicers
from fuzzball_core.api.http_errors import RestRunner
from fuzzball_core.api.rest import ExtraRoutes, build_rest_app
from fuzzball_core.orchestrate.identity_routes import identity_routes

T = TypeVar("T")

#: Fast polling, so that followed logs and ``--wait`` end promptly in tests.
TEST_POLL_INTERVAL = 0.05


class LoopThread:
    """An event loop running forever in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        """Run ``coroutine`` on the loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()


@dataclass
class LiveServers:
    """The REST gateway's root URL and the gRPC target of one running service."""

    rest_url: str
    grpc_target: str
    _runner: web.AppRunner
    _grpc: grpc.aio.Server

    async def close(self) -> None:
        await self._grpc.stop(grace=None)
        await self._runner.cleanup()


async def start_servers(
    service: Any,
    poll_interval: float = TEST_POLL_INTERVAL,
    extra_routes: Sequence[ExtraRoutes] = (),
) -> LiveServers:
    """Start both transports over ``service`` on free loopback ports. The REST gateway serves
    the identity routes as Orchestrate's does when ``service`` has an identity, and
    ``extra_routes`` besides."""
    own = [identity_routes(service.identity)] if hasattr(service, "identity") else []
    runner = RestRunner(
        build_rest_app(service, poll_interval=poll_interval, extra_routes=[*own, *extra_routes])
    )
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    server = grpc.aio.server()
    add_client_servicers(server, service, poll_interval=poll_interval)
    grpc_port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return LiveServers(f"http://{host}:{port}", f"127.0.0.1:{grpc_port}", runner, server)


def gateway_operations() -> set[str]:
    """``METHOD /path`` of every route a live stack's gateway serves (:func:`start_servers`
    without ``extra_routes``): the API's own and the identity routes."""
    identity = identity_routes(object())  # type: ignore[arg-type]  # routes only; never called
    app = build_rest_app(object(), extra_routes=[identity])  # type: ignore[arg-type]
    return {
        f"{route.method} {route.resource.canonical}"
        for route in app.router.routes()
        if route.method != "HEAD" and route.resource is not None
    }


HELLO = """\
version: v1
jobs:
  hello:
    image:
      uri: docker://alpine:latest
    command: ['/bin/sh', '-c', 'echo hello']
    resource:
      cpu:
        cores: 1
      memory:
        size: 1GB
"""


#: One job that is a task array of tasks 1 and 2.
TASKS = HELLO.replace(
    "    resource:", "    task-array:\n      start: 1\n      end: 2\n    resource:"
)


#: A retry policy without ``on`` is valid but retries nothing, which draws a warning; the
#: workflow's annotations are shown with it and draw another (they place nothing here).
WARNED = """\
version: v4
annotations: {zone: lab-2, team: genomics}
jobs:
  hello:
    image: {uri: docker://alpine:latest}
    command: [echo, hello]
    policy: {retry: {attempts: 2}}
    resource: {cpu: {cores: 1}, memory: {size: 1GB}}
"""

RETRY_WARNING = "jobs.hello.policy.retry.on: not set, so nothing is retried"
ANNOTATIONS_WARNING = "annotations: kept and shown with the workflow"
#: WARNED's two warnings, as :func:`warned` gives them
BOTH = sorted([RETRY_WARNING, ANNOTATIONS_WARNING])


def warned(warnings: list[str]) -> list[str]:
    """The start of each warning, one of WARNED's two (else the whole warning), sorted."""
    return sorted(
        next((s for s in (RETRY_WARNING, ANNOTATIONS_WARNING) if w.startswith(s)), w)
        for w in warnings
    )


@dataclass
class Stack:
    """A running service, its servers, and two accounts' tokens."""

    service: Any  # the service with the stack's node controls (sql_stack.SqlStack)
    servers: LiveServers
    loop: LoopThread
    token: str
    other_token: str

    @property
    def who(self) -> Any:
        return self.service.authenticate(self.token)

    def start(self, spec: str = HELLO, name: str = "hello") -> str:
        """Start a workflow as the first account (directly, not through a transport)."""
        return self.service.start_workflow(self.who, raw_specification=spec, name=name)
