"""Fixtures: the real Orchestrate service behind live REST and gRPC servers on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.live_api import LoopThread, Stack, start_servers
from support.oidc_stack import OidcStack, running_oidc_stack
from support.sql_stack import SqlStack

#: The node every stack starts with, so that workflows are scheduled and run.
NODE_CORES, NODE_MEMORY = 8, 16 * 1024**3


def _running_stack(database) -> Iterator[Stack]:
    loop = LoopThread()
    service = SqlStack(loop, database)
    _, token = service.create_account("alice")
    _, other = service.create_account("bob")
    service.add_node("node-1", NODE_CORES, NODE_MEMORY)
    servers = loop.run(start_servers(service.service))
    try:
        yield Stack(service, servers, loop, token, other)
    finally:
        loop.run(servers.close())
        service.close()
        loop.stop()


@pytest.fixture
def stack(tmp_path) -> Iterator[Stack]:
    yield from _running_stack(tmp_path / "orchestrate.db")


@pytest.fixture(scope="module")
def module_stack(tmp_path_factory) -> Iterator[Stack]:
    """One stack for every test of a module: for fuzzing, which sends thousands of requests
    and needs no fresh state."""
    yield from _running_stack(tmp_path_factory.mktemp("stack") / "orchestrate.db")


@pytest.fixture
def oidc(tmp_path) -> Iterator[OidcStack]:
    """The gateway with the OIDC issuer and the account routes (support.oidc_stack)."""
    with running_oidc_stack(tmp_path) as stack:
        yield stack
