"""NVIDIA GPUs and IMEX channels: discovery on the node and device setup for each job.

GPUs appear as ``/dev/nvidiaN`` (resource ``nvidia.com/gpu``); IMEX channels, which let the
GPUs of a multi-node NVLink domain share memory, as
``/dev/nvidia-caps-imex-channels/channelN`` (resource ``nvidia.com/imex-channel``). A job given
GPUs also needs the driver's control nodes, and ``NVIDIA_VISIBLE_DEVICES`` /
``NVIDIA_IMEX_CHANNELS`` so the CUDA stack inside sees exactly what it was given, and the
driver's user-space libraries and tools of the host's driver version, bound read-only
(:mod:`.nvidia_driver`: ``/usr/local/nvidia/lib64``, on ``LD_LIBRARY_PATH``, and
``/usr/local/nvidia/bin``, on ``PATH``), as Apptainer's ``--nv`` gives them, and the
sockets of the driver's daemons the host runs (persistence daemon, fabric manager, MPS),
bound read-write at their own paths, as libnvidia-container gives them.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fuzzball_core.hookspecs import ContainerPreparation, Device, hookimpl
from fuzzball_plugins.devices import nvidia_driver, nvidia_fabric
from fuzzball_plugins.devices.nvidia_ecc import EccCounters

GPU = "nvidia.com/gpu"
#: the GPU model's attribute: qualified, so that it becomes the node annotation the Federate's
#: router matches a job's ``resource.annotations`` against (``substrate/devices.py`` makes
#: annotations of qualified attributes only)
GPU_MODEL = f"{GPU}.model"
IMEX_CHANNEL = "nvidia.com/imex-channel"
CONTROL_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")

log = logging.getLogger(__name__)

_GPU_NODE = re.compile(r"nvidia(\d+)")
_CHANNEL_NODE = re.compile(r"channel(\d+)")


def _numbered(directory: Path, pattern: re.Pattern[str]) -> list[tuple[int, Path]]:
    if not directory.is_dir():
        return []
    found = []
    for entry in directory.iterdir():
        match = pattern.fullmatch(entry.name)
        if match:
            found.append((int(match.group(1)), entry))
    return sorted(found)


def _gpu_model(proc_root: Path, index: int) -> str | None:
    # /proc/driver/nvidia/gpus/<pci-id>/information lists "Model:" and "Device Minor:".
    for info in sorted(proc_root.glob("driver/nvidia/gpus/*/information")):
        fields = dict(
            line.split(":", 1)
            for line in info.read_text(errors="replace").splitlines()
            if ":" in line
        )
        if fields.get("Device Minor", "").strip() == str(index):
            return fields.get("Model", "").strip() or None
    return None


def driver_proc_root(dev_root: Path) -> Path:
    """Where the driver's ``driver/nvidia`` tree is read for the GPUs under ``dev_root``: a
    containerised agent given the host's ``/dev`` as ``/host/dev`` is given its ``/proc`` as
    ``/host/proc`` beside it, used when it has the driver's tree; otherwise ``/proc``."""
    beside = dev_root.parent / "proc"
    if dev_root != Path("/dev") and (beside / "driver" / "nvidia").is_dir():
        return beside
    return Path("/proc")


def discover(
    dev_root: Path, proc_root: Path | None = None, nvml: Any | None = None
) -> list[Device]:
    """The GPUs and IMEX channels under ``dev_root``, each GPU with its model (from
    ``proc_root``, by default :func:`driver_proc_root`) as :data:`GPU_MODEL` and its NVLink
    fabric (cluster, clique, domain) from ``nvml`` (nvidia-ml-py's ``pynvml``,
    initialised) when given."""
    proc_root = driver_proc_root(dev_root) if proc_root is None else proc_root
    fabric = nvidia_fabric.fabric_attributes(nvml) if nvml is not None else {}
    devices: list[Device] = []
    for index, path in _numbered(dev_root, _GPU_NODE):
        model = _gpu_model(proc_root, index)
        attributes = {GPU_MODEL: model} if model else {}
        attributes.update(fabric.get(index, {}))
        devices.append(Device(GPU, str(index), (str(path),), attributes))
    for index, path in _numbered(dev_root / "nvidia-caps-imex-channels", _CHANNEL_NODE):
        devices.append(Device(IMEX_CHANNEL, str(index), (str(path),)))
    return devices


#: the driver's ECC counters, read in the background (nvidia_ecc)
_ECC = EccCounters()


@hookimpl
def fuzzball_node_collect_metrics() -> Mapping[str, float] | None:
    """GPU ECC error counters, on nodes whose driver reports them (None: nothing to add)."""
    return _ECC.samples() or None


@hookimpl
def fuzzball_node_discover_devices(node_config: Mapping[str, Any]) -> Sequence[Device]:
    """Report the node's NVIDIA GPUs (with their NVLink fabric when NVML is there) and IMEX
    channels."""
    # the agent hands its ``substrate`` section as the file spells it (``dev-root``)
    dev_root = Path(node_config.get("dev-root") or node_config.get("dev_root") or "/dev")
    gpus_here = bool(_numbered(dev_root, _GPU_NODE))
    if gpus_here:
        driver_files(dev_root)  # searched now, at start, rather than by the first GPU job
        _log_daemon_sockets(dev_root)
    return discover(dev_root, nvml=nvidia_fabric.load_nvml() if gpus_here else None)


def driver_files(dev_root: Path) -> nvidia_driver.DriverFiles:
    """The driver's user-space files for the GPUs under ``dev_root`` (searched once per
    agent)."""
    return nvidia_driver.driver_files(nvidia_driver.host_root(dev_root), driver_proc_root(dev_root))


def give_driver_files(dev_root: Path, container: ContainerPreparation) -> None:
    """Bind the driver's libraries and tools into a GPU job's container and put their
    directories on its search paths; on a node where they were not found, warn the job."""
    files = driver_files(dev_root)
    if files.problem:
        container.warnings.append(
            f"NVIDIA driver libraries not found on this node: {files.problem}; the job has"
            " its GPUs' device nodes but no libcuda, libnvidia-ml or nvidia-smi from the host"
        )
        return
    container.binds.extend(files.binds())
    container.search_paths.setdefault("LD_LIBRARY_PATH", []).append(nvidia_driver.LIBRARY_DIR)
    if files.binaries:
        container.search_paths.setdefault("PATH", []).append(nvidia_driver.BINARY_DIR)


def give_daemon_sockets(dev_root: Path, container: ContainerPreparation) -> None:
    """Bind, read-write at their own paths, the sockets of the driver's daemons (and the MPS
    pipe directory) that the host has now: looked for per job, so that an MPS daemon started
    after the agent serves the next job."""
    root = nvidia_driver.host_root(dev_root)
    container.socket_binds.extend(nvidia_driver.daemon_sockets(root, nvidia_driver.daemon_paths()))


def _log_daemon_sockets(dev_root: Path) -> None:
    """Say in the agent's log which daemons' sockets GPU jobs get, as of its start."""
    root = nvidia_driver.host_root(dev_root)
    found = [dst for _, dst in nvidia_driver.daemon_sockets(root, nvidia_driver.daemon_paths())]
    log.info(
        "NVIDIA driver: daemon sockets for GPU jobs: %s (looked for again at each job start)",
        ", ".join(found) or "none yet",
    )


@hookimpl
def fuzzball_job_prepare_container(
    devices: Sequence[Device], container: ContainerPreparation
) -> None:
    """Give the job its GPUs (plus the driver's control nodes and user-space files) and
    IMEX channels."""
    gpus = [d for d in devices if d.kind == GPU]
    channels = [d for d in devices if d.kind == IMEX_CHANNEL]
    if gpus:
        dev_root = Path(gpus[0].paths[0]).parent
        for name in CONTROL_NODES:
            node = dev_root / name
            if node.exists() and str(node) not in container.device_paths:
                container.device_paths.append(str(node))
        for gpu in gpus:
            container.device_paths.extend(gpu.paths)
        container.env["NVIDIA_VISIBLE_DEVICES"] = ",".join(g.id for g in gpus)
        give_driver_files(dev_root, container)
        give_daemon_sockets(dev_root, container)
    if channels:
        for channel in channels:
            container.device_paths.extend(channel.paths)
        container.env["NVIDIA_IMEX_CHANNELS"] = ",".join(c.id for c in channels)
