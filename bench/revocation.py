"""How long a revoked token is still let in by the endpoint proxy: from the revocation to the
first refused request, for the revocations it is not told of in its own thread.

A real proxy process (``ProxyProcess``) in front of a small aiohttp service, over real accounts
(SQLite in a temporary directory, or ``--postgres URL``'s server in a fresh database), the
endpoint a service account's own (scope ``user``), and what ``fuzzball-orchestrate serve``
starts beside it for revocations (``service/revocation_channel.py``, where the tree has it).
One client asks the endpoint with the token again and again on one keep-alive connection
(about 1 ms a request here) while the token is revoked:

* ``command``: by the server's ``revoke-token`` command (its whole CLI run in a worker thread,
  with a configuration of its own naming the store and data directory): measured from the
  command's return (it committed just before) to the first 401; the requests let in after
  it returned are counted;
* ``workflow-end``: as a workflow's end revokes its token (the pass's UPDATE, then the ending
  event to the run secrets, on the event loop as the engine's pass does): measured from the
  commit to the first 401.

Each route ``--trials`` times with a fresh token, the proxy's kept caller renewed at a
varying moment before each (the 2 s ``TOKEN_TTL`` it would otherwise wait out). Prints the
median and the largest delay and the requests let in. Run it with this tree's and another
tree's packages (PYTHONPATH) to compare: ``python bench/revocation.py [--postgres URL]``.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import shutil
import socket
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from click.testing import CliRunner
from sqlalchemy import create_engine, text, update

from fuzzball_core.config import EndpointsConfig
from fuzzball_core.orchestrate import server
from fuzzball_core.orchestrate.endpoint_directory import Destination, Upstream
from fuzzball_core.orchestrate.endpoint_proxy import EndpointProxy, ProxyProcess
from fuzzball_core.orchestrate.run_secrets import RunSecretsService
from fuzzball_core.service.accounts import Accounts
from fuzzball_core.service.secrets import Secrets
from fuzzball_core.store.database import connect, migrate, session_factory
from fuzzball_core.store.models import ApiToken
from fuzzball_core.store.secret_box import SecretBox
from fuzzball_core.vocabulary import CredentialKind, EventKind

ENDPOINT = "e-1"
#: seconds a trial asks before giving up (past TOKEN_TTL: a refusal comes by then at worst)
GIVE_UP = 5.0
#: the tree has the channel (this change) or not (before it)
HAS_CHANNEL = importlib.util.find_spec("fuzzball_core.service.revocation_channel") is not None


@dataclass
class _Directory:
    """Endpoint ENDPOINT, ready at the service, is ``account_id``'s own."""

    url: str
    account_id: str
    on_forget: list[Any] = field(default_factory=list)

    def lookup(self, endpoint_id: str) -> Destination | None:
        upstream = Upstream("wf", "services.app", self.url, True, False, 30.0)
        return Destination(ENDPOINT, "app", "user", self.account_id, None, None, upstream)


class _Keeper:
    def touch(self, workflow_id: str, stage_name: str, idle_timeout: float) -> None:
        pass


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _until_refused(
    session: aiohttp.ClientSession, url: str, token: str, since: float
) -> tuple[float, int]:
    """Ask until refused: seconds from ``since`` (monotonic) to the 401, and how many
    requests answered 200 after ``since``."""
    let_in = 0
    headers = {"FB-Authorization": f"Bearer {token}"}
    while time.monotonic() - since < GIVE_UP:
        async with session.get(url, headers=headers) as answer:
            await answer.read()
            if answer.status == 401:
                return time.monotonic() - since, let_in
            let_in += 1
    return float("inf"), let_in


async def _bench(database_url: str, data_dir: Path, trials: int) -> dict[str, list[Any]]:
    store = connect(database_url)
    migrate(store)
    accounts = Accounts(session_factory(store))
    owner, _ = accounts.create("owner")
    config = data_dir / "config.yaml"
    config.write_text(f"data-dir: {data_dir}\ndatabase:\n  url: {database_url}\n")

    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="hello")

    app = web.Application()
    app.router.add_get("/{tail:.*}", hello)
    runner = web.AppRunner(app)
    await runner.setup()
    service_port = _free_port()
    await web.TCPSite(runner, "127.0.0.1", service_port).start()
    directory = _Directory(f"http://127.0.0.1:{service_port}", owner.account_id)
    proxy = EndpointProxy(
        None,  # type: ignore[arg-type]  # not reached for a ready endpoint
        accounts.authenticate,
        EndpointsConfig(domain="endpoints.test"),
        directory,  # type: ignore[arg-type]
        _Keeper(),  # type: ignore[arg-type]
    )
    unfollow = proxy.follow(accounts.revocations)
    process = ProxyProcess(proxy, directory)  # type: ignore[arg-type]
    proxy_port = _free_port()
    await process.start("127.0.0.1", proxy_port)
    receiver = None
    if HAS_CHANNEL:
        from fuzzball_core.service.revocation_channel import RevocationReceiver

        receiver = RevocationReceiver(store, data_dir, accounts.revocations)
        await receiver.start()
        if store.dialect.name == "postgresql":
            await asyncio.to_thread(receiver.listening.wait, 30)
    run_secrets = RunSecretsService(
        accounts.sessions,
        Secrets(accounts.sessions, SecretBox(data_dir)),
        accounts,
        lambda w, s: None,
    )
    url = f"http://127.0.0.1:{proxy_port}/endpoints/{ENDPOINT}/"
    results: dict[str, list[Any]] = {"command": [], "workflow-end": []}

    def command(token: str) -> None:
        result = CliRunner().invoke(
            server.cli, ["--config", str(config), "revoke-token"], input=token
        )
        if result.exit_code != 0:
            raise RuntimeError(f"revoke-token failed: {result.output}")

    try:
        async with aiohttp.ClientSession() as session:
            for trial in range(trials):
                # the command route
                token = await asyncio.to_thread(accounts.issue_token, "owner")
                async with session.get(url, headers={"FB-Authorization": f"Bearer {token}"}):
                    pass  # kept from now for TOKEN_TTL
                await asyncio.sleep(0.25 * (trial % 8))
                await asyncio.to_thread(command, token)
                results["command"].append(
                    await _until_refused(session, url, token, time.monotonic())
                )
                # the workflow-end route
                workflow_id = str(uuid.uuid4())
                token = await asyncio.to_thread(
                    accounts.issue_for,
                    owner.account_id,
                    credential=CredentialKind.WORKFLOW,
                    workflow_id=workflow_id,
                )
                async with session.get(url, headers={"FB-Authorization": f"Bearer {token}"}):
                    pass
                await asyncio.sleep(0.25 * ((trial + 3) % 8))
                with accounts.sessions() as db, db.begin():
                    db.execute(
                        update(ApiToken)
                        .where(ApiToken.workflow_id == workflow_id)
                        .values(revoked_at=time.time())
                    )
                ended = time.monotonic()
                run_secrets.workflow_event(
                    {"kind": EventKind.WORKFLOW_FINISHED, "workflow_id": workflow_id}
                )
                results["workflow-end"].append(await _until_refused(session, url, token, ended))
    finally:
        if receiver is not None:
            await receiver.close()
        unfollow()
        await process.close()
        proxy.pool.close()
        await runner.cleanup()
        store.dispose()
    return results


def _postgres_database(server_url: str) -> tuple[str, Any]:
    """A fresh database on ``server_url``'s server, and what drops it."""
    name = f"fb_bench_{uuid.uuid4().hex[:12]}"
    admin = create_engine(
        server_url.replace("postgresql://", "postgresql+psycopg://", 1),
        isolation_level="AUTOCOMMIT",
    )
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))

    def drop() -> None:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
        admin.dispose()

    return f"{server_url.rpartition('/')[0]}/{name}", drop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--postgres", default="", help="a PostgreSQL server URL (else SQLite)")
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="fb-"))  # short: the socket's path
    drop = None
    try:
        if args.postgres:
            database_url, drop = _postgres_database(args.postgres)
        else:
            database_url = f"sqlite:///{data_dir / 'store.db'}"
        results = asyncio.run(_bench(database_url, data_dir, args.trials))
    finally:
        if drop is not None:
            drop()
        shutil.rmtree(data_dir, ignore_errors=True)
    store = "PostgreSQL" if args.postgres else "SQLite"
    print(f"store {store}; revocation channel: {'yes' if HAS_CHANNEL else 'no (before it)'}")
    for route, figures in results.items():
        delays = [delay for delay, _ in figures]
        let_in = [count for _, count in figures]
        print(
            f"{route:13s} revoked to first 401: median {statistics.median(delays) * 1000:8.1f} ms,"
            f" max {max(delays) * 1000:8.1f} ms; requests let in after: median"
            f" {statistics.median(let_in):.0f}, max {max(let_in)} ({len(figures)} trials)"
        )


if __name__ == "__main__":
    main()
