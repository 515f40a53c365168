"""Orchestrate's REST gateway with the Web UI, over the real service, for browser tests.

``WebUiStack`` serves on loopback what ``fuzzball-orchestrate`` serves at its REST listener
for the UI: the gateway with the Web UI's routes and the identity routes, over Orchestrate's
SQL service and engine (``SqlStack``, whose scripted nodes register through the real node
hub), its secrets, its endpoint listing and its volume listing. It has one organization,
``acme``, with an owner who is also a cluster administrator (``admin``: may place holds)
and a plain member (``member``), both signing in with :data:`PASSWORD`, and two nodes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from fuzzball_core.api.http_errors import RestRunner
from fuzzball_core.api.rest import build_rest_app
from fuzzball_core.orchestrate.endpoint_urls import EndpointUrls
from fuzzball_core.orchestrate.identity_routes import identity_routes
from fuzzball_core.orchestrate.server import endpoint_links, volume_entries
from fuzzball_core.service.secrets import Secrets
from fuzzball_core.service.views import Principal
from fuzzball_core.store.models import User
from fuzzball_core.store.secret_box import SecretBox
from fuzzball_core.webui.app import webui_routes
from fuzzball_core.webui.context import WebUi
from support.live_api import LoopThread
from support.sql_stack import SqlStack

#: where the endpoint proxy would be (the pages link there; no test connects)
PROXY_URL = "http://127.0.0.1:8443"
#: what everyone in the stack signs in with (the password policy accepts it)
PASSWORD = "Sturdy-Lantern-42x"
GIB = 1024**3


@dataclass(frozen=True)
class Person:
    """Someone who signs in to the UI."""

    email: str
    user_id: str


class WebUiStack:
    """The gateway with the UI at :attr:`url`, its service (:attr:`stack`) and its people."""

    def __init__(self, loop: LoopThread, data_dir: Path) -> None:
        self.loop = loop
        self.stack = SqlStack(loop, data_dir / "orchestrate.db")
        service = self.stack.service
        identity = service.identity
        _, owner, _ = identity.create_organization(
            "acme", owner_email="admin@acme.test", owner_password=PASSWORD
        )
        member, _ = identity.add_member(
            identity.login_principal(owner.id), "member@acme.test", password=PASSWORD
        )
        with service.sessions() as session, session.begin():  # the owner runs the cluster too
            user = session.get(User, owner.id)
            assert user is not None
            user.cluster_admin = True
        self.admin = Person(owner.email, owner.id)
        self.member = Person(member.email, member.id)
        self.nodes = [
            self.stack.add_node("node-a", 8, 16 * GIB),
            self.stack.add_node("node-b", 4, 8 * GIB, devices={"nvidia.com/gpu": 1}),
        ]
        self.secrets = Secrets(service.sessions, SecretBox(data_dir))
        ui = WebUi(
            service,
            identity,
            service.accounts,
            service.sessions,
            self.secrets,
            endpoint_links(service.sessions, EndpointUrls.of(PROXY_URL, "", "")),
            volumes=volume_entries(service.sessions),
        )
        self._runner = RestRunner(
            build_rest_app(
                service,
                extra_routes=[identity_routes(identity), webui_routes(ui)],
            )
        )

        async def start() -> str:
            await self._runner.setup()
            await web.TCPSite(self._runner, "127.0.0.1", 0).start()
            host, port = self._runner.addresses[0][:2]
            return f"http://{host}:{port}"

        self.url = loop.run(start())

    def admin_principal(self) -> Principal:
        """Who the administrator acts as when signed in."""
        return self.stack.service.identity.login_principal(self.admin.user_id)

    def close(self) -> None:
        self.loop.run(self._runner.cleanup())
        self.stack.close()


@contextmanager
def running_webui_stack(data_dir: Path) -> Iterator[WebUiStack]:
    """A :class:`WebUiStack` on its own loop, closed afterwards."""
    loop = LoopThread()
    stack = WebUiStack(loop, data_dir)
    try:
        yield stack
    finally:
        stack.close()
        loop.stop()
