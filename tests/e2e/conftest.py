"""Fixtures for whole-system runs: a local registry, and Orchestrate with two Substrates.

The cluster is shared by the tests of a session (starting agents costs seconds); each test
starts its own workflows and looks only at them. Node ``node-1`` carries the annotation
``e2e/node=1`` and ``node-2`` ``e2e/node=2``, so a test can pin jobs to one node.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.cluster import Cluster, LocalRegistry, have_prerequisites
from support.mpi_image import build_ring, push_ring_image

missing = have_prerequisites()
if missing is not None:
    pytest.skip(missing, allow_module_level=True)

# The cluster and what it uses live as long as this folder's tests (package scope; the
# __init__.py makes the folder a package, without which pytest keeps such a fixture for the
# whole session): its Orchestrate runs in this process, and its engine loop, left running
# through later folders' tests, took part in what they patched (a class-wide
# Transaction.commit patch's one failure was taken by it instead of the test's own engine).


@pytest.fixture(scope="package")
def local_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRegistry]:
    """docker-registry on loopback holding a busybox-based library/alpine:latest."""
    registry = LocalRegistry(tmp_path_factory.mktemp("e2e-registry"))
    yield registry
    registry.stop()


@pytest.fixture(scope="package")
def mpi_image(local_registry: LocalRegistry, tmp_path_factory: pytest.TempPathFactory) -> str:
    """``docker://mpi-ring:latest`` holding ``/opt/ring`` and everything it needs (skips
    without MPICH)."""
    program = build_ring(tmp_path_factory.mktemp("mpi"))
    if program is None:
        pytest.skip("MPICH is not installed (apt-get install mpich libmpich-dev)")
    return push_ring_image(local_registry.url, program)


@pytest.fixture(scope="package")
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


@pytest.fixture
def make_cluster(tmp_path: Path, local_registry: LocalRegistry) -> Iterator[Callable[..., Cluster]]:
    """A fresh cluster for a test that kills an agent, deprovisions a node or needs its own
    settings, so the session's cluster stays healthy. Arguments are :class:`Cluster`'s; by
    default two agents of 2 cores and 1 GiB each. Every cluster made is closed afterwards."""
    made: list[Cluster] = []

    def make(**settings: Any) -> Cluster:
        options: dict[str, Any] = {"agents": 2, "cores": 2, "memory": "1GiB", **settings}
        directory = tmp_path / f"cluster-{len(made) + 1}"
        directory.mkdir()
        running = Cluster(directory, local_registry.url, **options)
        made.append(running)
        return running

    yield make
    for running in made:
        running.close()
