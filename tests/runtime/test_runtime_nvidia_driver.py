"""A GPU job's container, as the NVIDIA device plugin prepares it on a node with a (fake)
driver: the driver's libraries, tools and firmware are there, read-only, where CUDA images
look for them, and its tools run by name; the host's daemons' sockets are there at their own
paths, and a job connects to them."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.fake_nvidia_driver import (
    PERSISTENCED_SOCKET,
    SMI_OUTPUT,
    VERSION,
    listen,
    make_driver,
    on_host,
)
from support.unix_client import build_unix_client

from fuzzball_core.hookspecs import ContainerPreparation
from fuzzball_core.plugins import PluginRegistry
from fuzzball_core.substrate.drivers.steps import device_binds, with_search_paths
from fuzzball_plugins.devices import nvidia, nvidia_driver
from fuzzball_runtime import Bind
from fuzzball_runtime.spec import DEFAULT_PATH

pytestmark = pytest.mark.root

SCRIPT = f"""
cat /usr/local/nvidia/lib64/libcuda.so.1
nvidia-smi
test -r /lib/firmware/nvidia/{VERSION}/gsp_ga10x.bin && echo firmware
echo "$LD_LIBRARY_PATH"
(echo x >> /usr/local/nvidia/lib64/libcuda.so.1) 2>/dev/null && echo writable || echo read-only
"""
#: where the job finds the unix-socket client (bound in, as the busybox image has none)
CLIENT = "/usr/local/bin/unix-client"


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The root of a host with the fake driver (searched anew, MPS in its default place)."""
    monkeypatch.delenv(nvidia_driver.MPS_PIPE_DIRECTORY_ENV, raising=False)
    nvidia_driver.driver_files.cache_clear()
    nvidia_driver.daemon_paths.cache_clear()
    root = tmp_path / "host"
    make_driver(root)
    yield root
    nvidia_driver.driver_files.cache_clear()
    nvidia_driver.daemon_paths.cache_clear()


def gpu_job(root: Path, *extra_binds: Bind) -> dict[str, object]:
    """The binds and environment of a job given the fake driver's GPU under ``root`` (no
    device node: the fake's are plain files), as the plugin prepares it now."""
    gpu = next(d for d in nvidia.discover(root / "dev") if d.kind == "nvidia.com/gpu")
    preparation = ContainerPreparation()
    PluginRegistry().hook.fuzzball_job_prepare_container(
        job={}, devices=[gpu], container=preparation
    )
    env = {"PATH": DEFAULT_PATH, **preparation.env}
    with_search_paths(env, preparation.search_paths)
    return {"binds": [*device_binds(preparation), *extra_binds], "env": env}


@pytest.fixture
def unix_client(tmp_path: Path) -> Bind:
    """The static unix-socket client, bound read-only at :data:`CLIENT`."""
    directory = tmp_path / "client"
    directory.mkdir()
    return Bind(str(build_unix_client(directory)), CLIENT, readonly=True)


@contextlib.contextmanager
def daemon(path: Path, greeting: bytes) -> Iterator[None]:
    """A daemon listening at ``path`` that sends ``greeting`` to whoever connects."""
    server = listen(path)

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = server.accept()
                with client:
                    client.sendall(greeting)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            server.shutdown(socket.SHUT_RDWR)  # wakes the accept
        server.close()
        thread.join(5)


def test_the_driver_files_are_in_the_container_read_only_and_its_tools_run(run, host) -> None:
    status, output = run(SCRIPT, **gpu_job(host))

    assert status.exit_code == 0, output
    assert output.splitlines() == [
        f"fake libcuda.so.{VERSION}",
        SMI_OUTPUT,
        "firmware",
        "/usr/local/nvidia/lib64",
        "read-only",
    ]


def test_a_gpu_job_connects_to_the_hosts_persistence_daemon(run, host, unix_client) -> None:
    with daemon(on_host(host, PERSISTENCED_SOCKET), b"persistenced\n"):
        status, output = run(f"{CLIENT} {PERSISTENCED_SOCKET}", **gpu_job(host, unix_client))

    assert status.exit_code == 0, output
    assert output == "persistenced\n"


def test_a_gpu_job_reaches_mps_through_the_hosts_pipe_directory_read_write(
    run, host, unix_client
) -> None:
    pipes = on_host(host, nvidia_driver.MPS_PIPE_DIR)
    pipes.mkdir(parents=True)
    script = f"{CLIENT} /tmp/nvidia-mps/control && touch /tmp/nvidia-mps/client-was-here"

    with daemon(pipes / "control", b"mps control\n"):
        status, output = run(script, **gpu_job(host, unix_client))

    assert status.exit_code == 0, output
    assert output == "mps control\n"
    assert (pipes / "client-was-here").exists()
