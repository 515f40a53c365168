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
import shutil
import tempfile
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from click.testing import CliRunner
from sqlalchemy import create_engine, text
from support.cluster import free_port

from fuzzball_core.config import EndpointsConfig
from fuzzball_core.orchestrate import endpoint_proxy, server
from fuzzball_core.orchestrate.endpoint_directory import Destination, Upstream
from fuzzball_core.orchestrate.endpoint_proxy import EndpointProxy, ProxyProcess
from fuzzball_core.orchestrate.run_secrets import RunSecretsService
from fuzzball_core.service.accounts import Accounts
from fuzzball_core.service.revocation_channel import APPLICATION_NAME, RevocationReceiver
from fuzzball_core.service.secrets import Secrets
from fuzzball_core.store.database import connect, migrate, session_factory
from fuzzball_core.store.models import ApiToken
from fuzzball_core.store.secret_box import SecretBox
from fuzzball_core.vocabulary import CredentialKind, EventKind

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
    account_id: str

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


def _run(
    accounts: Accounts, scenario: Scenario, receiver: RevocationReceiver | None = None
) -> None:
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
        if receiver is not None:
            await receiver.start()
            await asyncio.to_thread(_listening, receiver)
        try:
            await scenario(
                _Proxied(f"http://127.0.0.1:{proxy_port}", accounts, token, asked, owner.account_id)
            )
        finally:
            if receiver is not None:
                await receiver.close()
            unfollow()
            await process.close()
            proxy.pool.close()
            await runner.cleanup()

    asyncio.run(main())


def _listening(receiver: RevocationReceiver) -> None:
    """Once ``receiver`` listens (its PostgreSQL connection is up; its socket is at once)."""
    if receiver.engine.dialect.name == "postgresql":
        assert receiver.listening.wait(30), "the receiver did not LISTEN"


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


def test_a_workflow_token_is_refused_at_its_next_request_once_the_workflow_ends(accounts, tmp_path):
    run_secrets = RunSecretsService(
        accounts.sessions,
        Secrets(accounts.sessions, SecretBox(tmp_path)),
        accounts,
        lambda workflow, stage: None,
    )

    def end_workflow(workflow_id: str) -> None:
        # as the engine ends one: its pass's transaction revokes the workflow's tokens, and
        # once it committed the ending event reaches the run secrets (its event hook)
        with accounts.sessions() as session, session.begin():
            session.query(ApiToken).filter(ApiToken.workflow_id == workflow_id).update(
                {ApiToken.revoked_at: accounts.clock()}
            )
        run_secrets.workflow_event(
            {"kind": EventKind.WORKFLOW_FINISHED, "workflow_id": workflow_id}
        )

    async def scenario(proxied: _Proxied) -> None:
        def token_of(workflow_id: str) -> str:
            return accounts.issue_for(
                proxied.account_id, credential=CredentialKind.WORKFLOW, workflow_id=workflow_id
            )

        ending = await asyncio.to_thread(token_of, "wf-ending")
        other = await asyncio.to_thread(token_of, "wf-running")
        async with aiohttp.ClientSession() as session:
            assert await proxied.get(ending, session) == 200
            assert await proxied.get(other, session) == 200
            await asyncio.to_thread(end_workflow, "wf-ending")
            assert await proxied.get(ending, session) == 401
            assert await proxied.get(other, session) == 200
        assert proxied.asked.count(other) == 1  # the running workflow's caller stayed kept

    _run(accounts, scenario)


def test_a_token_revoked_by_the_revoke_token_command_is_refused_at_its_next_request(database_url):
    """The server's ``revoke-token`` command is another process: it tells the running
    server (NOTIFY on PostgreSQL, the data directory's socket on SQLite)."""
    store = connect(database_url)
    migrate(store)
    accounts = Accounts(session_factory(store))
    # short: a unix socket's path holds at most 107 bytes
    data_dir = Path(tempfile.mkdtemp(prefix="fb-"))
    config = data_dir / "config.yaml"
    config.write_text(f"data-dir: {data_dir}\ndatabase:\n  url: {database_url}\n")
    receiver = RevocationReceiver(store, data_dir, accounts.revocations)

    def command(token: str) -> str:
        result = CliRunner().invoke(
            server.cli, ["--config", str(config), "revoke-token"], input=token
        )
        assert result.exit_code == 0, result.output
        return result.output

    async def scenario(proxied: _Proxied) -> None:
        # told after the proxy (subscribed after it), so once the proxy forgot: over SQLite
        # before the command returns, over PostgreSQL as the notification arrives
        forgotten = threading.Event()
        accounts.revocations.subscribe(lambda revocation: forgotten.set())
        async with aiohttp.ClientSession() as session:
            assert await proxied.get(proxied.token, session) == 200
            assert await proxied.get(proxied.token, session) == 200  # kept
            output = await asyncio.to_thread(command, proxied.token)
            assert await asyncio.to_thread(forgotten.wait, 30), "the server was not told"
            assert await proxied.get(proxied.token, session) == 401
            assert proxied.token not in output

    try:
        _run(accounts, scenario, receiver)
    finally:
        store.dispose()
        shutil.rmtree(data_dir, ignore_errors=True)


def test_a_token_revoked_unheard_is_refused_once_the_listener_listens_again(
    postgresql_url, postgresql_server, monkeypatch
):
    """A revocation NOTIFYed while the server's LISTEN connection was down is lost; once it
    listens again, what the proxy kept is forgotten and the store refuses the token."""
    # only the listener's catch-up can refuse the kept caller within the test
    monkeypatch.setattr(endpoint_proxy, "TOKEN_TTL", 3600.0)
    store = connect(postgresql_url)
    migrate(store)
    accounts = Accounts(session_factory(store))
    data_dir = Path(tempfile.mkdtemp(prefix="fb-"))
    receiver = RevocationReceiver(store, data_dir, accounts.revocations)
    outside = create_engine(
        postgresql_server.replace("postgresql://", "postgresql+psycopg://", 1),
        isolation_level="AUTOCOMMIT",
    )

    def terminate_listener() -> None:
        with outside.connect() as connection:
            connection.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = :database AND application_name = :name"
                ),
                {"database": postgresql_url.rpartition("/")[2], "name": APPLICATION_NAME},
            )

    async def scenario(proxied: _Proxied) -> None:
        async with aiohttp.ClientSession() as session:
            assert await proxied.get(proxied.token, session) == 200
            assert await proxied.get(proxied.token, session) == 200  # kept
            # revoked by another process whose notification is lost: another Accounts,
            # told to no receiver
            await asyncio.to_thread(Accounts(session_factory(store)).revoke, proxied.token)
            assert await proxied.get(proxied.token, session) == 200  # still kept
            await asyncio.to_thread(terminate_listener)
            for _ in range(600):
                if receiver.listens >= 2:
                    break
                await asyncio.sleep(0.05)
            assert receiver.listens >= 2, "the receiver did not LISTEN again"
            assert await proxied.get(proxied.token, session) == 401

    try:
        _run(accounts, scenario, receiver)
    finally:
        outside.dispose()
        store.dispose()
        shutil.rmtree(data_dir, ignore_errors=True)
