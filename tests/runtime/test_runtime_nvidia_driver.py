"""A GPU job's container, as the NVIDIA device plugin prepares it on a node with a (fake)
driver: the driver's libraries, tools and firmware are there, read-only, where CUDA images
look for them, and its tools run by name."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.fake_nvidia_driver import SMI_OUTPUT, VERSION, make_driver

from fuzzball_core.hookspecs import ContainerPreparation
from fuzzball_core.plugins import PluginRegistry
from fuzzball_core.substrate.drivers.steps import device_binds, with_search_paths
from fuzzball_plugins.devices import nvidia, nvidia_driver
from fuzzball_runtime.spec import DEFAULT_PATH

pytestmark = pytest.mark.root

SCRIPT = f"""
cat /usr/local/nvidia/lib64/libcuda.so.1
nvidia-smi
test -r /lib/firmware/nvidia/{VERSION}/gsp_ga10x.bin && echo firmware
echo "$LD_LIBRARY_PATH"
(echo x >> /usr/local/nvidia/lib64/libcuda.so.1) 2>/dev/null && echo writable || echo read-only
"""


@pytest.fixture
def gpu_job(tmp_path: Path) -> Iterator[dict[str, object]]:
    """The binds and environment of a job given the fake driver's GPU (no device node: the
    fake's are plain files)."""
    nvidia_driver.driver_files.cache_clear()
    dev = make_driver(tmp_path / "host")
    gpu = next(d for d in nvidia.discover(dev) if d.kind == "nvidia.com/gpu")
    preparation = ContainerPreparation()
    PluginRegistry().hook.fuzzball_job_prepare_container(
        job={}, devices=[gpu], container=preparation
    )
    env = {"PATH": DEFAULT_PATH, **preparation.env}
    with_search_paths(env, preparation.search_paths)
    yield {"binds": device_binds(preparation), "env": env}
    nvidia_driver.driver_files.cache_clear()


def test_the_driver_files_are_in_the_container_read_only_and_its_tools_run(run, gpu_job) -> None:
    status, output = run(SCRIPT, **gpu_job)

    assert status.exit_code == 0, output
    assert output.splitlines() == [
        f"fake libcuda.so.{VERSION}",
        SMI_OUTPUT,
        "firmware",
        "/usr/local/nvidia/lib64",
        "read-only",
    ]
