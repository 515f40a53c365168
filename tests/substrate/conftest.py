"""Fixtures for the node agent's tests: a local registry with a busybox-based alpine image,
and the services one execution needs on a node (real image backend, real runtime)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from support.cluster import LocalRegistry, have_prerequisites

from fuzzball_core.plugins import get_registry
from fuzzball_core.substrate.devices import DevicePool
from fuzzball_core.substrate.drivers import NodeServices
from fuzzball_core.substrate.images import NodeImages
from fuzzball_core.substrate.volumes import WorkflowVolumes
from fuzzball_runtime import release_kept_cgroups, sweep


@pytest.fixture(scope="session")
def local_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRegistry]:
    missing = have_prerequisites()
    if missing is not None:
        pytest.skip(missing)
    registry = LocalRegistry(tmp_path_factory.mktemp("substrate-registry"))
    yield registry
    registry.stop()


@pytest.fixture(scope="session")
def images_config(local_registry: LocalRegistry) -> dict[str, object]:
    """The ``images`` section pointing docker.io at the local registry."""
    return {"registries": {"docker.io": {"mirrors": [local_registry.url]}}}


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One image cache for the session's executions (each image is converted once)."""
    return tmp_path_factory.mktemp("substrate-cache")


@pytest.fixture
def node(
    tmp_path: Path, images_config: dict[str, object], shared_cache: Path
) -> Iterator[NodeServices]:
    registry = get_registry()
    services = NodeServices(
        images=NodeImages(registry, images_config, shared_cache),
        volumes=WorkflowVolumes(tmp_path / "work"),
        devices=DevicePool([], {}),
        hooks=registry.hook,
        state_dir=tmp_path / "runtime",
        runs_dir=tmp_path / "runs",
        start_pool=ThreadPoolExecutor(4),
        pull_pool=ThreadPoolExecutor(2),
    )
    yield services
    services.start_pool.shutdown()
    services.pull_pool.shutdown()
    release_kept_cgroups()  # the groups the jobs left for their workflows' next jobs
    sweep(services.state_dir)  # the runtime's per-state-directory cgroup parents go too
