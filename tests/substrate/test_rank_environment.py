"""A multinode part's container environment: the node's interface and Open MPI's settings
go over the job's environment, but an interface choice the job's ``env`` or its image's
``Env`` makes is kept, and so is any other ``OMPI_*`` it sets, but the two that wire
``mpirun`` to the other parts (``plm_rsh_agent``, ``plm_rsh_no_tree_spawn``)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.drivers import ImageConfig
from fuzzball_core.plugins import get_registry
from fuzzball_core.substrate.devices import DevicePool
from fuzzball_core.substrate.drivers import NodeServices, RunRequest, driver_for
from fuzzball_core.substrate.drivers.container_job import MultinodePartDriver
from fuzzball_core.substrate.images import NodeImages
from fuzzball_core.substrate.network import NodeNetwork
from fuzzball_core.substrate.volumes import WorkflowVolumes

#: the loopback interface holds this node's address: its subnet is the node network's
SUBNET = "127.0.0.0/8"


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
        network=NodeNetwork(address="127.0.0.1"),
    )
    pool.shutdown()


def part_environment(
    services: NodeServices,
    implementation: str,
    env: list[str] | None = None,
    image: ImageConfig | None = None,
    sink: Callable[[int, str, bytes], None] | None = None,
) -> dict[str, str]:
    """The environment of a one-node multinode job's container, as its driver builds it
    (what it says to Orchestrate goes to ``sink``)."""
    job = {
        "image": {"uri": "docker://alpine:latest"},
        "command": ["true"],
        "multinode": {"nodes": 1, "procs-per-node": 1, "implementation": implementation},
        "env": env or [],
    }
    request = RunRequest.from_assignment(
        node_pb2.Assignment(
            run_id=5, workflow_id="wf", stage_name="jobs.j", job_json=json.dumps(job)
        )
    )
    config = image or ImageConfig()

    async def only_this_node(seq: int, offered: dict[str, str]) -> dict[str, str]:
        return offered  # what every part offered: this one's alone

    async def build() -> dict[str, str]:
        driver = driver_for(request, services, sink or (lambda *_: None), fence=only_this_node)
        assert isinstance(driver, MultinodePartDriver)
        try:
            extra = await driver.rank_environment(config)
            return driver.container_spec(Path("/images/a.erofs"), extra, config).env
        finally:
            driver.destroy()

    return asyncio.run(build())


def test_open_mpi_ranks_talk_over_the_node_networks_subnet(services: NodeServices) -> None:
    env = part_environment(services, "openmpi")

    assert env["OMPI_MCA_btl_tcp_if_include"] == SUBNET
    assert env["OMPI_MCA_oob_tcp_if_include"] == SUBNET


def test_a_jobs_own_btl_interfaces_replace_the_node_subnet(services: NodeServices) -> None:
    env = part_environment(services, "openmpi", ["OMPI_MCA_btl_tcp_if_include=ib0"])

    assert env["OMPI_MCA_btl_tcp_if_include"] == "ib0"
    assert env["OMPI_MCA_oob_tcp_if_include"] == SUBNET


def test_a_job_excluding_interfaces_gets_no_include_of_the_same_framework(
    services: NodeServices,
) -> None:
    # Open MPI aborts when a framework is given both an include and an exclude list
    env = part_environment(services, "openmpi", ["OMPI_MCA_oob_tcp_if_exclude=docker0"])

    assert env["OMPI_MCA_oob_tcp_if_exclude"] == "docker0"
    assert "OMPI_MCA_oob_tcp_if_include" not in env
    assert env["OMPI_MCA_btl_tcp_if_include"] == SUBNET


def test_an_images_own_open_mpi_interfaces_are_kept(services: NodeServices) -> None:
    image = ImageConfig(env=("OMPI_MCA_btl_tcp_if_exclude=lo,docker0",))

    env = part_environment(services, "openmpi", image=image)

    assert env["OMPI_MCA_btl_tcp_if_exclude"] == "lo,docker0"
    assert "OMPI_MCA_btl_tcp_if_include" not in env


def test_other_open_mpi_settings_of_the_job_win(services: NodeServices) -> None:
    env = part_environment(services, "openmpi", ["OMPI_ALLOW_RUN_AS_ROOT=0"])

    assert env["OMPI_ALLOW_RUN_AS_ROOT"] == "0"


def test_the_launch_settings_stay_fuzzballs_and_the_log_says_so(
    services: NodeServices, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="fuzzball.substrate"):
        env = part_environment(
            services,
            "openmpi",
            ["OMPI_MCA_plm_rsh_agent=ssh", "OMPI_MCA_plm_rsh_no_tree_spawn=0"],
        )

    assert env["OMPI_MCA_plm_rsh_agent"] == "/.fuzzball-openmpi/agent"
    assert env["OMPI_MCA_plm_rsh_no_tree_spawn"] == "1"
    assert (
        "OMPI_MCA_plm_rsh_agent, OMPI_MCA_plm_rsh_no_tree_spawn, set by the job or its image,"
        " replaced by Fuzzball's" in caplog.text
    )


def test_an_image_setting_the_launch_settings_is_told_so_in_the_jobs_events(
    services: NodeServices,
) -> None:
    said: list[tuple[int, str, bytes]] = []
    image = ImageConfig(env=("OMPI_MCA_plm_rsh_agent=ssh",))

    env = part_environment(services, "openmpi", image=image, sink=lambda *m: said.append(m))

    assert env["OMPI_MCA_plm_rsh_agent"] == "/.fuzzball-openmpi/agent"
    warnings = [json.loads(data)["warning"] for _, stream, data in said if stream == "progress"]
    assert warnings == [
        "OMPI_MCA_plm_rsh_agent, set by the job or its image, replaced by Fuzzball's: Open"
        " MPI's launch reaches the other nodes through them"
    ]


def test_transports_are_pointed_at_the_nodes_interface(services: NodeServices) -> None:
    env = part_environment(services, "generic")

    assert env["NCCL_SOCKET_IFNAME"] == env["GLOO_SOCKET_IFNAME"] == "lo"
    assert env["UCX_NET_DEVICES"] == "lo"


def test_a_jobs_own_transport_interface_is_kept(services: NodeServices) -> None:
    env = part_environment(services, "mpich", ["UCX_NET_DEVICES=mlx5_0:1"])

    assert env["UCX_NET_DEVICES"] == "mlx5_0:1"
    assert env["NCCL_SOCKET_IFNAME"] == "lo"


def test_an_images_own_transport_interface_is_kept(services: NodeServices) -> None:
    image = ImageConfig(env=("NCCL_SOCKET_IFNAME=ib0",))

    env = part_environment(services, "generic", image=image)

    assert env["NCCL_SOCKET_IFNAME"] == "ib0"
    assert env["GLOO_SOCKET_IFNAME"] == "lo"
