"""The node's instance metadata guard (``substrate.metadata-guard``): every job's container
asks the runtime for it, and an agent whose host cannot guard refuses to start."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.job_specs import container_spec, node_services

from fuzzball_core.config import parse_config
from fuzzball_core.errors import FailedPrecondition
from fuzzball_core.substrate import agent
from fuzzball_core.substrate.drivers import NodeServices
from fuzzball_core.substrate.network import NodeNetwork
from fuzzball_runtime import MetadataGuardError

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
    with node_services(tmp_path) as made:
        yield made


@pytest.mark.parametrize("network", [{}, {"isolated": True}], ids=["node network", "isolated"])
def test_every_jobs_container_asks_for_the_guard_whatever_its_network(services, network) -> None:
    job = {"image": IMAGE, "command": ["true"], "network": network}

    assert container_spec(services, job).metadata_guard is True


def test_a_node_with_the_guard_off_asks_for_none(services) -> None:
    services.network = NodeNetwork(metadata_guard=False)

    spec = container_spec(services, {"image": IMAGE, "command": ["true"]})

    assert spec.metadata_guard is False
