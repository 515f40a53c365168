"""Web UI benchmark: the workflows list with 10,000 workflows in the database.

Serves the REST gateway with the Web UI (as Orchestrate does) over Orchestrate's SQL service
on SQLite, and on PostgreSQL when ``FUZZBALL_TEST_POSTGRES_URL`` names a server (a database
of its own is made and dropped), stores the workflows of one signed-in user, then asks for
the list's first page, a page 100 pages in (through its page token) and the first page by
Started, and prints the server time (from the request's arrival to its answer, measured by
a middleware around the UI's handler) at p50 and p99. The target is under 200 ms. Usage:
    python bench/ui.py [--workflows 10000] [--requests 200]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from aiohttp import web
from sqlalchemy import create_engine, text

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path.insert(0, str(TESTS))  # tests/support

from support.live_api import LoopThread  # noqa: E402
from support.webui_client import signed_in  # noqa: E402
from support.webui_stack import PASSWORD, Person  # noqa: E402
from support.workflow_rows import add_workflows  # noqa: E402

from fuzzball_core.api.http_errors import RestRunner  # noqa: E402
from fuzzball_core.api.rest import build_rest_app  # noqa: E402
from fuzzball_core.orchestrate.engine import Engine  # noqa: E402
from fuzzball_core.orchestrate.node_hub import NodeHub  # noqa: E402
from fuzzball_core.orchestrate.service import SqlOrchestrateService  # noqa: E402
from fuzzball_core.store.database import connect, migrate, session_factory  # noqa: E402
from fuzzball_core.webui.app import webui_routes  # noqa: E402
from fuzzball_core.webui.context import WebUi  # noqa: E402
from fuzzball_plugins.schedulers.default import DefaultScheduler  # noqa: E402

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ServerTimes:
    """How long the server took over each UI request, by path."""

    def __init__(self) -> None:
        self.seconds: list[float] = []

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        started = time.perf_counter()
        response = await handler(request)
        if request.path == "/workflows":
            self.seconds.append(time.perf_counter() - started)
        return response


class UiServer:
    """The gateway with the UI over a service on ``url``, with one signed-in user."""

    def __init__(self, loop: LoopThread, url: str) -> None:
        database = connect(url)
        migrate(database)
        self.sessions = session_factory(database)
        engine = Engine(self.sessions, DefaultScheduler(), NodeHub())
        self.service = SqlOrchestrateService(self.sessions, engine)
        identity = self.service.identity
        _, owner, _ = identity.create_organization(
            "bench", owner_email="owner@bench.test", owner_password=PASSWORD
        )
        self.person = Person(owner.email, owner.id)
        self.account_id = identity.login_principal(owner.id).account_id
        ui = WebUi(self.service, identity, self.service.accounts, self.sessions)
        self.times = ServerTimes()
        app = build_rest_app(self.service, extra_routes=[webui_routes(ui)])
        app.middlewares.append(self.times.middleware)
        self._runner = RestRunner(app)
        self._loop = loop

        async def start() -> str:
            await self._runner.setup()
            await web.TCPSite(self._runner, "127.0.0.1", 0).start()
            host, port = self._runner.addresses[0][:2]
            return f"http://{host}:{port}"

        self.url = loop.run(start())

    def close(self) -> None:
        self._loop.run(self._runner.cleanup())


@contextmanager
def postgres_database(server: str) -> Iterator[str]:
    """A new database on ``server``, dropped afterwards."""
    name = f"fb_bench_{uuid.uuid4().hex[:12]}"
    admin = create_engine(
        server.replace("postgresql://", "postgresql+psycopg://", 1), isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield f"{server.rpartition('/')[0]}/{name}"
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
        admin.dispose()


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def measure(server: UiServer, client: httpx.Client, url: str, requests: int) -> str:
    """Ask for ``url`` ``requests`` times; its server time at p50 and p99 in milliseconds."""
    client.get(url).raise_for_status()  # warm: templates compiled, statements cached
    server.times.seconds.clear()
    for _ in range(requests):
        answer = client.get(url)
        answer.raise_for_status()
    samples = server.times.seconds
    return (
        f"p50 {1000 * statistics.median(samples):6.1f} ms  "
        f"p99 {1000 * percentile(samples, 0.99):6.1f} ms"
    )


def page_url(client: httpx.Client, url: str, pages: int) -> str:
    """The URL of the page ``pages`` next-links after ``url``."""
    for _ in range(pages):
        found = re.search(r'<a href="([^"]+)" rel="next">', client.get(url).text)
        if found is None:
            break
        url = found[1].replace("&amp;", "&")
    return url


def bench(label: str, url: str, workflows: int, requests: int) -> None:
    loop = LoopThread()
    server = UiServer(loop, url)
    try:
        started = time.perf_counter()
        add_workflows(server.sessions, server.account_id, workflows)
        stored = time.perf_counter() - started
        client, _ = signed_in(server, server.person)
        print(f"{label}: {workflows} workflows stored in {stored:.1f} s")
        deep = page_url(client, "/workflows", 100)
        for name, path in (
            ("first page, Submitted newest first", "/workflows"),
            ("page 101 (page token)", deep),
            ("first page by Started", "/workflows?order=started&dir=desc"),
            ("first page, status filter", "/workflows?status=FAILED"),
        ):
            print(f"  {name:36} {measure(server, client, path, requests)}")
    finally:
        server.close()
        loop.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workflows", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=200)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        sqlite = f"sqlite:///{Path(directory) / 'orchestrate.db'}"
        bench("SQLite", sqlite, options.workflows, options.requests)
    server = os.environ.get("FUZZBALL_TEST_POSTGRES_URL")
    if server:
        with postgres_database(server) as url:
            bench("PostgreSQL", url, options.workflows, options.requests)
    else:
        print("PostgreSQL: skipped (set FUZZBALL_TEST_POSTGRES_URL to a server)")


if __name__ == "__main__":
    main()
