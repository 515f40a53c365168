"""The NVIDIA device plugin's NVLink fabric, against a simulated NVML: each GPU's fabric
cluster and clique become its attributes, and the node's NVLink domain annotation when its
GPUs agree."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

from fuzzball_core.scheduling import NVLINK_DOMAIN
from fuzzball_core.substrate.devices import device_annotations
from fuzzball_plugins.devices import nvidia

CLUSTER = uuid.UUID("6f1c5c33-7d0b-4b1e-9a53-2f6b5b0c8a11")


@dataclass
class FabricInfo:
    """NVML's ``c_nvmlGpuFabricInfo_t``, as nvidia-ml-py returns it."""

    clusterUuid: bytes
    status: int
    cliqueId: int
    state: int


class SimulatedNvml:
    """The calls of nvidia-ml-py's ``pynvml`` the plugin makes, over ``gpus``: (minor
    number, fabric info or None for a GPU without a fabric), in NVML's index order."""

    def __init__(self, gpus: list[tuple[int, FabricInfo | None]]) -> None:
        self.gpus = gpus

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetMinorNumber(self, handle: int) -> int:
        return self.gpus[handle][0]

    def nvmlDeviceGetGpuFabricInfo(self, handle: int) -> FabricInfo:
        info = self.gpus[handle][1]
        if info is None:
            raise RuntimeError("NVMLError_NotSupported: Not Supported")
        return info


def fabric(clique: int, *, state: int = 3, status: int = 0) -> FabricInfo:
    return FabricInfo(CLUSTER.bytes, status, clique, state)


def gpus(tmp_path: Path, count: int) -> Path:
    dev = tmp_path / "dev"
    dev.mkdir()
    for i in range(count):
        (dev / f"nvidia{i}").touch()
    return dev


def test_each_gpu_reports_its_fabric_cluster_clique_and_domain(tmp_path: Path) -> None:
    # NVML numbers GPUs by PCI order; the device nodes by minor number
    nvml = SimulatedNvml([(1, fabric(7)), (0, fabric(7))])

    found = nvidia.discover(gpus(tmp_path, 2), nvml=nvml)

    assert [dict(gpu.attributes) for gpu in found] == [
        {
            "nvlink.cluster-uuid": str(CLUSTER),
            "nvlink.clique-id": "7",
            NVLINK_DOMAIN: f"{CLUSTER}.7",
        }
    ] * 2


def test_a_node_whose_gpus_share_a_domain_is_annotated_with_it(tmp_path: Path) -> None:
    nvml = SimulatedNvml([(0, fabric(7)), (1, fabric(7))])

    found = nvidia.discover(gpus(tmp_path, 2), nvml=nvml)

    assert device_annotations(found) == {NVLINK_DOMAIN: f"{CLUSTER}.7"}


def test_gpus_of_two_domains_make_no_annotation(tmp_path: Path) -> None:
    nvml = SimulatedNvml([(0, fabric(7)), (1, fabric(8))])

    assert device_annotations(nvidia.discover(gpus(tmp_path, 2), nvml=nvml)) == {}


def test_gpus_without_a_complete_fabric_report_none(tmp_path: Path) -> None:
    nvml = SimulatedNvml([(0, None), (1, fabric(7, state=1)), (2, fabric(7, status=5))])

    found = nvidia.discover(gpus(tmp_path, 3), nvml=nvml)

    assert [dict(gpu.attributes) for gpu in found] == [{}, {}, {}]
    assert device_annotations(found) == {}


def test_without_nvml_gpus_are_found_without_a_fabric(tmp_path: Path) -> None:
    found = nvidia.discover(gpus(tmp_path, 1))

    assert [(gpu.kind, dict(gpu.attributes)) for gpu in found] == [("nvidia.com/gpu", {})]
