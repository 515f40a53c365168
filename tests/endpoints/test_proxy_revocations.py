"""A revocation reaches the endpoint proxy at once: Orchestrate's proxy (``EndpointProxy``,
following its accounts' revocations) forgets the revoked token's caller and tells its own
process (``ProxyProcess``) to forget that token's decisions before the revoking call returns,
so the token is refused at its next request; other callers' kept answers stay.

A real proxy process and a real aiohttp service on loopback, and real accounts over SQLite;
the endpoint is a service account's own (scope ``user``), ready, from a stand-in directory.
Before, the kept caller and decisions let a revoked token in for up to ``TOKEN_TTL`` (2 s).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import aiohttp
import pytest
from aiohttp import web
from support.cluster import free_port

from fuzzball_core.config import EndpointsConfig
from fuzzball_core.orchestrate.endpoint_directory import Destination, Upstream
from fuzzball_core.orchestrate.endpoint_proxy import EndpointProxy, ProxyProcess
from fuzzball_core.service.accounts import Accounts
from fuzzball_core.store.database import connect, migrate, session_factory

ENDPOINT = "e-1"


@dataclass
class _Directory:
    """Endpoint ENDPOINT, ready at the service, is ``account_id``'s own."""

    url: str
    account_id: str
    on_forget: list[Callable[[str], None]] = field(default_factory=list)

    def lookup(self, endpoint_id: str) -> Destination | None:
        if endpoint_id != ENDPOINT:
            return None
        upstream = Upstream("wf", "services.app", self.url, True, False, 30.0)
        return Destination(ENDPOINT, "app", "user", self.account_id, None, None, upstream)


class _Keeper:
    def touch(self, workflow_id: str, stage_name: str, idle_timeout: float) -> None:
        pass


@dataclass
class _Proxied:
    """What a scenario works with: the proxy's URL, the accounts and the service's owner."""

    url: str
    accounts: Accounts
    token: str
    asked: list[str]

    async def get(self, token: str, session: aiohttp.ClientSession) -> int:
        headers = {"FB-Authorization": f"Bearer {token}"}
        async with session.get(f"{self.url}/endpoints/{ENDPOINT}/", headers=headers) as answer:
            return answer.status


Scenario = Callable[[_Proxied], Awaitable[None]]


@pytest.fixture
def accounts(tmp_path) -> Accounts:
    engine = connect(f"sqlite:///{tmp_path / 'store.db'}")
    migrate(engine)
    return Accounts(session_factory(engine))


def _run(accounts: Accounts, scenario: Scenario) -> None:
    owner, token = accounts.create("owner")
    asked: list[str] = []

    def authenticate(presented: str):  # counted: a kept caller is not asked again
        asked.append(presented)
        return accounts.authenticate(presented)

    async def main() -> None:
        async def hello(request: web.Request) -> web.Response:
            return web.Response(text="hello")

        app = web.Application()
        app.router.add_get("/{tail:.*}", hello)
        runner = web.AppRunner(app)
        await runner.setup()
        service_port = free_port()
        await web.TCPSite(runner, "127.0.0.1", service_port).start()
        directory = _Directory(f"http://127.0.0.1:{service_port}", owner.account_id)
        proxy = EndpointProxy(
            None,  # type: ignore[arg-type]  # the engine: not reached for a ready endpoint
            authenticate,
            EndpointsConfig(domain="endpoints.test"),
            directory,  # type: ignore[arg-type]
            _Keeper(),  # type: ignore[arg-type]
        )
        unfollow = proxy.follow(accounts.revocations)
        process = ProxyProcess(proxy, directory)  # type: ignore[arg-type]
        proxy_port = free_port()
        await process.start("127.0.0.1", proxy_port)
        try:
            await scenario(_Proxied(f"http://127.0.0.1:{proxy_port}", accounts, token, asked))
        finally:
            unfollow()
            await process.close()
            proxy.pool.close()
            await runner.cleanup()

    asyncio.run(main())


def test_a_revoked_token_is_refused_at_its_next_request(accounts):
    async def scenario(proxied: _Proxied) -> None:
        async with aiohttp.ClientSession() as session:
            assert await proxied.get(proxied.token, session) == 200
            assert await proxied.get(proxied.token, session) == 200  # kept
            # revoked as the API revokes: in a worker thread, back once the proxy forgot
            await asyncio.to_thread(proxied.accounts.revoke, proxied.token)
            assert await proxied.get(proxied.token, session) == 401

    _run(accounts, scenario)


def test_a_token_revoked_with_its_accounts_is_refused_at_its_next_request(accounts):
    async def scenario(proxied: _Proxied) -> None:
        async with aiohttp.ClientSession() as session:
            assert await proxied.get(proxied.token, session) == 200
            await asyncio.to_thread(proxied.accounts.revoke_all, "owner")
            assert await proxied.get(proxied.token, session) == 401

    _run(accounts, scenario)


def test_a_revocation_leaves_other_tokens_kept(accounts):
    async def scenario(proxied: _Proxied) -> None:
        other = await asyncio.to_thread(proxied.accounts.issue_token, "owner")
        _, unrelated = await asyncio.to_thread(proxied.accounts.create, "unrelated")
        async with aiohttp.ClientSession() as session:
            assert await proxied.get(proxied.token, session) == 200
            assert await proxied.get(other, session) == 200
            await asyncio.to_thread(proxied.accounts.revoke, unrelated)
            assert await proxied.get(proxied.token, session) == 200
            assert await proxied.get(other, session) == 200
        assert proxied.asked == [proxied.token, other]

    _run(accounts, scenario)
