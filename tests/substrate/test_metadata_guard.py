"""The node's instance metadata guard (``substrate.metadata-guard``): every job's container
asks the runtime for it, and an agent whose host cannot guard refuses to start."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.config import parse_config
from fuzzball_core.errors import FailedPrecondition
from fuzzball_core.plugins import get_registry
from fuzzball_core.substrate import agent
from fuzzball_core.substrate.devices import DevicePool
from fuzzball_core.substrate.drivers import ContainerJobDriver, NodeServices, RunRequest
from fuzzball_core.substrate.images import NodeImages
from fuzzball_core.substrate.network import NodeNetwork
from fuzzball_core.substrate.volumes import WorkflowVolumes
from fuzzball_runtime import ContainerSpec, MetadataGuardError

IMAGE = {"uri": "docker://alpine:latest"}
REFUSAL = "substrate.metadata-guard: the instance metadata guard does not work on this kernel"


def settings(**substrate: object) -> object:
    return parse_config(
        {"substrate": {"node-token": "t", "orchestrate-address": "o:1", **substrate}}
    )


def test_an_agent_whose_host_cannot_guard_refuses_to_start_naming_the_setting(
    monkeypatch,
) -> None:
    def refuse() -> None:
        raise MetadataGuardError(REFUSAL)

    monkeypatch.setattr(agent, "check_metadata_guard", refuse)

    with pytest.raises(FailedPrecondition, match=r"^substrate\.metadata-guard: "):
        agent.check_settings(settings())  # type: ignore[arg-type]


def test_an_agent_with_the_guard_off_does_not_check_for_it(monkeypatch) -> None:
    checked: list[bool] = []
    monkeypatch.setattr(agent, "check_metadata_guard", lambda: checked.append(True))

    agent.check_settings(settings(**{"metadata-guard": False}))  # type: ignore[arg-type]

    assert checked == []


@pytest.fixture
def services(tmp_path: Path) -> Iterator[NodeServices]:
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


def container_spec(services: NodeServices, job: dict[str, object]) -> ContainerSpec:
    request = RunRequest.from_assignment(
        node_pb2.Assignment(
            run_id=3, workflow_id="wf", stage_name="jobs.j", job_json=json.dumps(job)
        )
    )

    async def build() -> ContainerSpec:
        driver = ContainerJobDriver(request, services, lambda *_: None)
        return driver.container_spec(Path("/images/alpine.erofs"), {})

    return asyncio.run(build())


@pytest.mark.parametrize("network", [{}, {"isolated": True}], ids=["node network", "isolated"])
def test_every_jobs_container_asks_for_the_guard_whatever_its_network(services, network) -> None:
    job = {"image": IMAGE, "command": ["true"], "network": network}

    assert container_spec(services, job).metadata_guard is True


def test_a_node_with_the_guard_off_asks_for_none(services) -> None:
    services.network = NodeNetwork(metadata_guard=False)

    spec = container_spec(services, {"image": IMAGE, "command": ["true"]})

    assert spec.metadata_guard is False
