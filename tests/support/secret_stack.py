"""A live REST gateway with the secret routes, over the real service, and tenants to call it.

``SecretStack`` runs Orchestrate's service layer (``SqlStack``) and serves the gateway with
the three secret families on loopback; ``tenant`` makes an organization with its owner, and
``member`` adds people to it, each with an account-scoped API token exchanged the way a
client does (``Identity.account_token``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from aiohttp import web

from fuzzball_core.api.http_errors import RestRunner
from fuzzball_core.api.rest import build_rest_app
from fuzzball_core.orchestrate.secret_routes import secret_routes
from fuzzball_core.service.secrets import Secrets
from fuzzball_core.store.secret_box import SecretBox
from fuzzball_core.vocabulary import CredentialKind, OrganizationRole
from support.live_api import LoopThread
from support.sql_stack import ADMIN, SqlStack

#: a password every policy rule accepts
PASSWORD = "Correct-Horse-9-Battery"


@dataclass(frozen=True)
class Person:
    """A member of an organization and the API token of their personal account."""

    email: str
    user_id: str
    account_id: str
    organization_id: str
    token: str


class SecretStack:
    """The service, its secrets and the gateway at :attr:`url`."""

    def __init__(self, loop: LoopThread, data_dir: Path) -> None:
        self.loop = loop
        self.data_dir = data_dir
        self.stack = SqlStack(loop, data_dir / "orchestrate.db")
        self.service = self.stack.service
        self.sessions = self.stack.engine.sessions
        self.box = SecretBox(data_dir)
        self.secrets = Secrets(self.sessions, self.box)
        self._runner = RestRunner(
            build_rest_app(self.service, extra_routes=[secret_routes(self.secrets)])
        )

        async def start() -> str:
            await self._runner.setup()
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            await site.start()
            host, port = self._runner.addresses[0][:2]
            return f"http://{host}:{port}"

        self.url = loop.run(start())
        self._organizations: dict[str, str] = {}

    def close(self) -> None:
        self.loop.run(self._runner.cleanup())
        self.stack.close()

    def tenant(self, organization: str, owner_email: str) -> Person:
        """A new organization and its owner."""
        identity = self.service.identity
        _, owner, _ = identity.create_organization(
            organization, owner_email=owner_email, owner_password=PASSWORD
        )
        self._organizations[organization] = owner.id
        return self._person(owner.id)

    def member(self, organization: str, email: str, *, cluster_admin: bool = False) -> Person:
        """A new member of ``organization``, added by a cluster administrator (only one may
        make another)."""
        org_id = self.service.identity.login_principal(self._organizations[organization])
        user, _ = self.service.identity.add_member(
            ADMIN,
            email,
            role=OrganizationRole.MEMBER,
            password=PASSWORD,
            cluster_admin=cluster_admin,
            organization_id=org_id.organization_id,
        )
        return self._person(user.id)

    def _person(self, user_id: str) -> Person:
        identity = self.service.identity
        login = identity.login_principal(user_id)
        token = identity.account_token(login, login.account_id)
        assert login.email is not None and login.organization_id is not None
        return Person(login.email, user_id, login.account_id, login.organization_id, token)

    def workflow_token(self, person: Person, workflow_id: str = "wf-1") -> str:
        """A workflow's own token acting for ``person`` (what a running job is handed)."""
        return self.service.accounts.issue_for(
            person.account_id,
            user_id=person.user_id,
            credential=CredentialKind.WORKFLOW,
            workflow_id=workflow_id,
        )

    def client(self, token: str) -> httpx.Client:
        """A plain HTTP client of the gateway with ``token``."""
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {token}"}, timeout=30.0
        )


@contextmanager
def secret_stack(data_dir: Path) -> Iterator[SecretStack]:
    """A running :class:`SecretStack`, stopped afterwards."""
    loop = LoopThread()
    stack = SecretStack(loop, data_dir)
    try:
        yield stack
    finally:
        stack.close()
        loop.stop()
