"""The capabilities a node's jobs may hold (``substrate.job-capabilities``): Podman's default
set unless the node names another, for every job's container."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.job_specs import container_spec, node_services

from fuzzball_core.config import parse_config
from fuzzball_core.errors import InvalidArgument
from fuzzball_core.substrate import agent
from fuzzball_core.substrate.drivers import NodeServices
from fuzzball_runtime import capabilities

JOB = {"image": {"uri": "docker://alpine:latest"}, "command": ["true"]}


@pytest.fixture
def services(tmp_path: Path) -> Iterator[NodeServices]:
    with node_services(tmp_path) as made:
        yield made


def settings(**substrate: object) -> object:
    return parse_config(
        {
            "substrate": {
                "node-token": "t",
                "orchestrate-address": "o:1",
                "metadata-guard": False,
                **substrate,
            }
        }
    )


def test_a_jobs_container_holds_the_default_set_unless_the_node_names_one(services) -> None:
    assert container_spec(services, JOB).capabilities == capabilities.DEFAULT


def test_a_node_naming_a_set_gives_it_to_every_job(services) -> None:
    services.capabilities = capabilities.configured(["cap_chown", "SETUID"], "x")

    assert container_spec(services, JOB).capabilities == frozenset({"CHOWN", "SETUID"})


def test_all_keeps_every_capability(services) -> None:
    services.capabilities = capabilities.configured(["ALL"], "x")

    assert container_spec(services, JOB).capabilities is None


def test_an_agent_refuses_to_start_with_an_unknown_capability_naming_the_setting() -> None:
    with pytest.raises(InvalidArgument, match=r"^substrate\.job-capabilities: unknown capab"):
        agent.check_settings(settings(**{"job-capabilities": ["CHOWN", "WIZARD"]}))  # type: ignore[arg-type]


def test_all_beside_other_names_is_refused() -> None:
    with pytest.raises(InvalidArgument, match=r"ALL keeps every capability"):
        agent.check_settings(settings(**{"job-capabilities": ["ALL", "CHOWN"]}))  # type: ignore[arg-type]
