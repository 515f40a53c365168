"""A live REST gateway serving the OIDC issuer and the account routes, over the real service.

``OidcStack`` runs Orchestrate's service layer (``SqlStack``) with an issuer and token store
whose clock the test moves (:class:`Clock`: API tokens, access tokens, refresh tokens and
device codes expire by it; the lockout of sign-ins keeps Identity's own clock), and serves
the gateway on loopback with the issuer's routes and the identity routes (``GET
/v3/accounts``, ``/v3/accounts/{id}/token``, ``/v3/profile/password``...), as
``fuzzball-orchestrate`` serves them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from aiohttp import web

from fuzzball_core.api.http_errors import RestRunner
from fuzzball_core.api.rest import build_rest_app
from fuzzball_core.orchestrate.identity_routes import identity_routes
from fuzzball_core.orchestrate.oidc_routes import oidc_routes
from fuzzball_core.service.oidc import CLIENT_ID, REALM_PATH, OidcIssuer, SigningKey
from support.live_api import LoopThread
from support.sql_stack import SqlStack

#: a password every policy rule accepts
PASSWORD = "Correct-Horse-9-Battery"
#: the device flow's polling interval in these stacks (seconds, by the stack's clock)
POLL_INTERVAL = 5


class Clock:
    """The real time moved forward by :meth:`advance` (real time passes too, so that a
    device login's polls are paced as in life; expiries are reached by advancing)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


class OidcStack:
    """The service, its issuer (:attr:`issuer`, at :attr:`issuer_url`) and the gateway at
    :attr:`url`."""

    def __init__(self, loop: LoopThread, data_dir: Path, *, poll_interval: int = POLL_INTERVAL):
        self.loop = loop
        self.stack = SqlStack(loop, data_dir / "orchestrate.db")
        self.service = self.stack.service
        self.clock = Clock()
        self.issuer = OidcIssuer(
            self.stack.engine.sessions,
            self.service.identity,
            SigningKey.load_or_create(data_dir / "oidc" / "signing-key.pem"),
            clock=self.clock,
            poll_interval=poll_interval,
        )
        self.service.oidc = self.issuer
        self.service.accounts.clock = self.clock
        self._runner = RestRunner(
            build_rest_app(
                self.service,
                extra_routes=[oidc_routes(self.service), identity_routes(self.service.identity)],
            )
        )

        async def start() -> str:
            await self._runner.setup()
            await web.TCPSite(self._runner, "127.0.0.1", 0).start()
            host, port = self._runner.addresses[0][:2]
            return f"http://{host}:{port}"

        self.url = loop.run(start())

    @property
    def issuer_url(self) -> str:
        return f"{self.url}{REALM_PATH}"

    @property
    def token_url(self) -> str:
        return f"{self.issuer_url}/protocol/openid-connect/token"

    @property
    def device_url(self) -> str:
        return f"{self.issuer_url}/protocol/openid-connect/auth/device"

    @property
    def approval_url(self) -> str:
        return f"{self.issuer_url}/device"

    def organization(self, name: str, owner_email: str, password: str = PASSWORD) -> Any:
        """A new organization; its owner (a UserView) signs in with ``password``."""
        _, owner, _ = self.service.identity.create_organization(
            name, owner_email=owner_email, owner_password=password
        )
        return owner

    def password_form(self, email: str, password: str = PASSWORD, **extra: str) -> dict[str, str]:
        """The password grant's form as the real CLI sends it."""
        return {
            "client_id": CLIENT_ID,
            "grant_type": "password",
            "username": email,
            "password": password,
            "scope": "offline_access",
            **extra,
        }

    def close(self) -> None:
        self.loop.run(self._runner.cleanup())
        self.stack.close()


@contextmanager
def running_oidc_stack(data_dir: Path, **options: Any) -> Iterator[OidcStack]:
    """An :class:`OidcStack` on its own loop, closed afterwards."""
    loop = LoopThread()
    stack = OidcStack(loop, data_dir, **options)
    try:
        yield stack
    finally:
        stack.close()
        loop.stop()
