"""Hollow nodes (tests/support/hollow.py) through a real Orchestrate: the simulated agents
register over gRPC, are given a task array's runs and report them, and the workflow
finishes. The benchmark (bench/hollow.py) relies on exactly this."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cluster import (
    NODE_TOKEN,
    InProcessOrchestrate,
    LocalRegistry,
    cluster_config,
    free_port,
)
from support.hollow import HollowStats, run_fleet
from support.registry_server import REGISTRY_BINARY

pytestmark = pytest.mark.skipif(
    not Path(REGISTRY_BINARY).exists(), reason="needs Debian's docker-registry for the image"
)

ARRAY = """
version: v1
jobs:
  zero:
    image: {uri: docker://alpine:latest}
    command: [/bin/true]
    resource: {cpu: {cores: 1}, memory: {size: 64MB}}
    task-array: {start: 1, end: 200}
"""


class Fleet:
    """Hollow nodes on their own event loop in a thread of the test."""

    def __init__(self, address: str, count: int) -> None:
        self.stats = HollowStats()
        self.loop = asyncio.new_event_loop()
        self.stop = asyncio.Event()
        names = [f"hollow-{i:02d}" for i in range(count)]
        self.thread = threading.Thread(
            target=self.loop.run_until_complete,
            args=(run_fleet(address, NODE_TOKEN, names, self.stop, self.stats, cores=4),),
            daemon=True,
        )
        self.thread.start()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(15)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[InProcessOrchestrate, Fleet]]:
    registry = LocalRegistry(tmp_path / "registry")
    orchestrate = InProcessOrchestrate(
        cluster_config(tmp_path, registry.url, grpc_port=free_port())
    )
    try:
        fleet = Fleet(orchestrate.config.orchestrate.grpc_listen, 20)
        try:
            yield orchestrate, fleet
        finally:
            fleet.close()
    finally:
        orchestrate.close()
        registry.stop()


def test_twenty_hollow_nodes_register_and_run_a_task_array_to_finished(
    cluster: tuple[InProcessOrchestrate, Fleet],
) -> None:
    orchestrate, fleet = cluster
    deadline = 60.0
    waited = 0.0
    while len([n for n in orchestrate.nodes() if n.status == "READY"]) < 20:
        assert waited < deadline, "20 hollow nodes did not register"
        threading.Event().wait(0.1)
        waited += 0.1

    workflow_id = orchestrate.start_workflow(ARRAY)
    view = orchestrate.wait_for(workflow_id, timeout=120)

    assert view.status == "FINISHED", view
    (stage,) = [s for s in view.stages if s.name == "jobs.zero"]
    assert stage.tasks_finished == 200
    assert fleet.stats.exited >= 200  # the array's runs (and the image's) were the nodes'
    assert {n.name for n in orchestrate.nodes()} == {f"hollow-{i:02d}" for i in range(20)}
