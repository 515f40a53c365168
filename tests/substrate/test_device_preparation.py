"""What the device plugins prepare reaches the job's container: their binds read-only, their
sockets read-write, their directories on the container's search paths after the image's and
the job's own, and their warnings to Orchestrate as the job's events."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from support.fake_nvidia_driver import VERSION, make_driver

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.hookspecs import ContainerPreparation
from fuzzball_core.plugins import get_registry
from fuzzball_core.substrate.devices import DevicePool
from fuzzball_core.substrate.drivers import ContainerJobDriver, NodeServices, RunRequest
from fuzzball_core.substrate.images import NodeImages
from fuzzball_core.substrate.volumes import WorkflowVolumes
from fuzzball_plugins.devices import nvidia, nvidia_driver
from fuzzball_runtime import Bind, ContainerSpec

IMAGE = {"uri": "docker://nvidia/cuda:12.4.1-base-ubuntu22.04"}
GPU_JOB = {
    "image": IMAGE,
    "command": ["nvidia-smi"],
    "resource": {"devices": {"nvidia.com/gpu": 1}},
}


class Plugin:
    """A device plugin preparing every job's container with the fields it was given."""

    def __init__(self, **preparation: object) -> None:
        self.preparation = preparation

    def fuzzball_job_prepare_container(self, job, devices, container: ContainerPreparation) -> None:
        for name, value in self.preparation.items():
            setattr(container, name, value)


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    executor = ThreadPoolExecutor(1)
    yield executor
    executor.shutdown()


def node_services(
    tmp_path: Path, pool: ThreadPoolExecutor, hooks: object, devices: DevicePool
) -> NodeServices:
    return NodeServices(
        images=NodeImages(get_registry(), {}, tmp_path / "cache"),
        volumes=WorkflowVolumes(tmp_path / "work"),
        devices=devices,
        hooks=hooks,
        state_dir=tmp_path / "runtime",
        runs_dir=tmp_path / "runs",
        start_pool=pool,
        pull_pool=pool,
    )


def container_spec(
    services: NodeServices, job: dict[str, object], sent: list[tuple[int, str, bytes]] | None = None
) -> ContainerSpec:
    request = RunRequest.from_assignment(
        node_pb2.Assignment(
            run_id=7, workflow_id="wf", stage_name="jobs.gpu", job_json=json.dumps(job)
        )
    )

    async def build() -> ContainerSpec:
        sink = (lambda *message: sent.append(message)) if sent is not None else (lambda *_: None)
        driver = ContainerJobDriver(request, services, sink)
        return driver.container_spec(Path("/images/cuda.erofs"), {})

    return asyncio.run(build())


def test_a_device_plugins_binds_are_read_only(tmp_path, pool) -> None:
    plugin = Plugin(binds=[(str(tmp_path), "/usr/local/nvidia/lib64/libcuda.so.1")])
    services = node_services(tmp_path, pool, plugin, DevicePool([], {}))

    spec = container_spec(services, {"image": IMAGE, "command": ["true"]})

    assert Bind(str(tmp_path), "/usr/local/nvidia/lib64/libcuda.so.1", readonly=True) in spec.binds


def test_a_device_plugins_socket_binds_are_read_write(tmp_path, pool) -> None:
    plugin = Plugin(socket_binds=[(str(tmp_path), "/var/run/nvidia-persistenced/socket")])
    services = node_services(tmp_path, pool, plugin, DevicePool([], {}))

    spec = container_spec(services, {"image": IMAGE, "command": ["true"]})

    assert Bind(str(tmp_path), "/var/run/nvidia-persistenced/socket", readonly=False) in spec.binds


def test_search_paths_come_after_the_jobs_own_entries_once_each(tmp_path, pool) -> None:
    plugin = Plugin(
        search_paths={
            "LD_LIBRARY_PATH": ["/usr/local/nvidia/lib64", "/opt/lib"],
            "PATH": ["/usr/local/nvidia/bin"],
        }
    )
    services = node_services(tmp_path, pool, plugin, DevicePool([], {}))
    job = {
        "image": IMAGE,
        "command": ["true"],
        "env": ["LD_LIBRARY_PATH=/opt/lib:/usr/local/cuda/compat"],
    }

    spec = container_spec(services, job)

    assert spec.env["LD_LIBRARY_PATH"] == "/opt/lib:/usr/local/cuda/compat:/usr/local/nvidia/lib64"
    assert spec.env["PATH"].endswith(":/bin:/usr/local/nvidia/bin")


def test_a_search_path_sets_a_variable_the_job_leaves_unset(tmp_path, pool) -> None:
    plugin = Plugin(search_paths={"LD_LIBRARY_PATH": ["/usr/local/nvidia/lib64"]})
    services = node_services(tmp_path, pool, plugin, DevicePool([], {}))

    spec = container_spec(services, {"image": IMAGE, "command": ["true"]})

    assert spec.env["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64"


def test_a_plugins_warning_goes_to_orchestrate_once_on_the_progress_stream(tmp_path, pool) -> None:
    plugin = Plugin(warnings=["no driver libraries", "no driver libraries"])
    services = node_services(tmp_path, pool, plugin, DevicePool([], {}))
    sent: list[tuple[int, str, bytes]] = []

    container_spec(services, {"image": IMAGE, "command": ["true"]}, sent)

    assert sent == [(7, "progress", json.dumps({"warning": "no driver libraries"}).encode())]


@pytest.fixture
def gpu_node(tmp_path: Path, pool: ThreadPoolExecutor) -> Iterator[NodeServices]:
    """A node with one GPU of the fake driver, prepared by the builtin NVIDIA plugin."""
    nvidia_driver.driver_files.cache_clear()
    dev = make_driver(tmp_path / "host")
    yield node_services(tmp_path, pool, get_registry().hook, DevicePool(nvidia.discover(dev), {}))
    nvidia_driver.driver_files.cache_clear()


def test_a_gpu_jobs_container_has_the_drivers_libcuda_read_only_on_its_library_path(
    gpu_node, tmp_path
) -> None:
    spec = container_spec(gpu_node, GPU_JOB)

    real = tmp_path / "host" / "usr/lib64" / f"libcuda.so.{VERSION}"
    assert Bind(str(real), "/usr/local/nvidia/lib64/libcuda.so.1", readonly=True) in spec.binds
    assert spec.env["LD_LIBRARY_PATH"].split(":")[-1] == "/usr/local/nvidia/lib64"
    assert str(tmp_path / "host/dev/nvidia0") in spec.devices
