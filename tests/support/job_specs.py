"""A node's services without an agent, and the container spec its job driver builds for a
job: what a node setting asks of every job's container, checked without starting one."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.drivers import ImageConfig
from fuzzball_core.plugins import get_registry
from fuzzball_core.substrate.devices import DevicePool
from fuzzball_core.substrate.drivers import ContainerJobDriver, NodeServices, RunRequest
from fuzzball_core.substrate.drivers.base import LogSink
from fuzzball_core.substrate.drivers.steps import NO_CONFIG
from fuzzball_core.substrate.images import NodeImages
from fuzzball_core.substrate.volumes import WorkflowVolumes
from fuzzball_runtime import ContainerSpec


@contextlib.contextmanager
def node_services(tmp_path: Path) -> Iterator[NodeServices]:
    """A node's shared services under ``tmp_path``, with no device and one worker thread."""
    registry = get_registry()
    pool = ThreadPoolExecutor(1)
    try:
        yield NodeServices(
            images=NodeImages(registry, {}, tmp_path / "cache"),
            volumes=WorkflowVolumes(tmp_path / "work"),
            devices=DevicePool([], {}),
            hooks=registry.hook,
            state_dir=tmp_path / "runtime",
            runs_dir=tmp_path / "runs",
            start_pool=pool,
            pull_pool=pool,
        )
    finally:
        pool.shutdown()


def container_spec(
    services: NodeServices,
    job: dict[str, object],
    *,
    config: ImageConfig = NO_CONFIG,
    extra_env: dict[str, str] | None = None,
    sink: LogSink = lambda *_: None,
) -> ContainerSpec:
    """The container the node's job driver asks the runtime for, for ``job`` in an image of
    ``config``, with the platform's ``extra_env`` (secrets, ranks'); ``sink`` gets the run's
    output."""
    request = RunRequest.from_assignment(
        node_pb2.Assignment(
            run_id=3, workflow_id="wf", stage_name="jobs.j", job_json=json.dumps(job)
        )
    )

    async def build() -> ContainerSpec:
        driver = ContainerJobDriver(request, services, sink)
        return driver.container_spec(Path("/images/alpine.erofs"), dict(extra_env or {}), config)

    return asyncio.run(build())
