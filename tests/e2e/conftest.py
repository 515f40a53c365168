"""Fixtures for whole-system runs: a local registry, and Orchestrate with two Substrates.

The cluster is shared by the tests of a session (starting agents costs seconds); each test
starts its own workflows and looks only at them. Node ``node-1`` carries the annotation
``e2e/node=1`` and ``node-2`` ``e2e/node=2``, so a test can pin jobs to one node.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster import Cluster, LocalRegistry, have_prerequisites

missing = have_prerequisites()
if missing is not None:
    pytest.skip(missing, allow_module_level=True)


@pytest.fixture(scope="session")
def local_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRegistry]:
    """docker-registry on loopback holding a busybox-based library/alpine:latest."""
    registry = LocalRegistry(tmp_path_factory.mktemp("e2e-registry"))
    yield registry
    registry.stop()


@pytest.fixture(scope="session")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, local_registry: LocalRegistry
) -> Iterator[Cluster]:
    """Orchestrate (in this process) and two Substrate agents of 4 cores and 4 GiB each."""
    directory: Path = tmp_path_factory.mktemp("e2e-cluster")
    running = Cluster(
        directory,
        local_registry.url,
        agents=2,
        cores=4,
        memory="4GiB",
        annotations_per_node=True,
    )
    yield running
    running.close()
