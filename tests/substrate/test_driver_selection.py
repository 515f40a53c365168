"""Which task driver runs an assignment: chosen in one place by the kind of its work."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.plugins import get_registry
from fuzzball_core.substrate.devices import DevicePool
from fuzzball_core.substrate.drivers import (
    ContainerJobDriver,
    ImageBuildDriver,
    ImagePullDriver,
    MultinodePartDriver,
    NodeServices,
    RunRequest,
    ServiceDriver,
    TaskDriver,
    driver_for,
)
from fuzzball_core.substrate.images import NodeImages
from fuzzball_core.substrate.volumes import WorkflowVolumes

IMAGE = {"uri": "docker://alpine:latest"}
PROBE = {"tcp-socket": {"port": 8080}}


@pytest.fixture
def node(tmp_path: Path) -> Iterator[NodeServices]:
    """A node's services; nothing is pulled or started by choosing a driver."""
    registry = get_registry()
    pool = ThreadPoolExecutor(1)
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
    pool.shutdown()


def _request(stage: str, definition: dict[str, Any], node_ids: Sequence[str] = ()) -> RunRequest:
    return RunRequest.from_assignment(
        node_pb2.Assignment(
            run_id=3,
            workflow_id="wf",
            stage_name=stage,
            job_json=json.dumps(definition),
            node_ids=list(node_ids),
        )
    )


def _driver(node: NodeServices, request: RunRequest, node_id: str = "") -> TaskDriver:
    async def choose() -> TaskDriver:
        return driver_for(request, node, lambda *_: None, node_id=node_id)

    return asyncio.run(choose())


def test_a_job_runs_in_the_container_job_driver_without_a_readiness_probe(node):
    driver = _driver(node, _request("jobs.hello", {"image": IMAGE, "command": ["true"]}))

    assert type(driver) is ContainerJobDriver
    assert driver.readiness_probe is None


def test_a_service_runs_in_the_service_driver_with_its_readiness_probe(node):
    definition = {"image": IMAGE, "command": ["httpd"], "readiness-probe": PROBE}

    driver = _driver(node, _request("services.web", definition))

    assert type(driver) is ServiceDriver
    assert driver.readiness_probe is not None and driver.readiness_probe.tcp_socket.port == 8080


def test_a_multinode_job_runs_as_this_nodes_part_of_the_ranks(node):
    definition = {"image": IMAGE, "command": ["mpirun"], "multinode": {"nodes": 2}}

    driver = _driver(node, _request("jobs.mpi", definition, ["n1", "n2"]), node_id="n2")

    assert isinstance(driver, MultinodePartDriver)
    assert driver.ranks.part == 1 and driver.hostname() == "mpi-1"
    assert driver.readiness_probe is None


def test_a_multinode_service_is_a_part_that_is_still_probed_for_readiness(node):
    definition = {
        "image": IMAGE,
        "command": ["serve"],
        "multinode": {"nodes": 2},
        "readiness-probe": PROBE,
    }

    driver = _driver(node, _request("services.db", definition, ["n1", "n2"]), node_id="n1")

    assert isinstance(driver, MultinodePartDriver)
    assert driver.readiness_probe is not None


def test_image_stage_payloads_run_in_the_image_drivers(node):
    pull = _request("images.base", {"kind": "image-pull", "uri": IMAGE["uri"]})
    build = _request(
        "images.tools", {"kind": "image-build", "from": IMAGE, "post": "true", "target": {}}
    )

    assert type(_driver(node, pull)) is ImagePullDriver
    assert type(_driver(node, build)) is ImageBuildDriver
