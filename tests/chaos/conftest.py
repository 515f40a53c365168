"""Fixtures of the fault-injection suite: the shared local registry and a PostgreSQL server of
the suite's own (it is restarted by the rounds, so it is never the one other tests share).

The round machinery lives in ``chaos_round.py`` and ``chaos_parts.py`` beside this file, and
uses the whole-system helpers of ``tests/support/cluster.py``; ``bench/chaos.py`` runs more rounds
of the same.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.chaos_parts import PrivatePostgres
from support.chaos_round import private_postgres
from support.cluster import LocalRegistry, have_prerequisites

missing = have_prerequisites()
if missing is not None:
    pytest.skip(missing, allow_module_level=True)


@pytest.fixture(scope="session")
def chaos_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRegistry]:
    """docker-registry on loopback with library/alpine:latest; rounds kill and restart it."""
    registry = LocalRegistry(tmp_path_factory.mktemp("chaos-registry"))
    yield registry
    registry.stop()


@pytest.fixture(scope="session")
def chaos_postgres() -> Iterator[PrivatePostgres]:
    """A PostgreSQL server of the suite's own, restarted by the rounds that run on it."""
    with private_postgres() as server:
        if server is None:
            pytest.skip("PostgreSQL rounds need Debian's postgresql (scripts/install.sh)")
        yield server
