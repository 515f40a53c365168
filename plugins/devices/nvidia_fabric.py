"""Each GPU's NVLink fabric: which cluster and clique of a multi-node NVLink domain (GB200
NVL72 and the like) it belongs to, from NVML's GPU fabric info (nvidia-ml-py's
``nvmlDeviceGetGpuFabricInfo``).

GPUs that share a fabric cluster UUID and clique id reach each other's memory over NVLink
(through IMEX channels across nodes); the device plugin reports that pair as each GPU's
attributes, and the node's annotation :data:`NVLINK_DOMAIN` when all its GPUs agree, which the
scheduler keeps multinode jobs inside. Nodes without NVML (no driver, no nvidia-ml-py) or
without a fabric (GPUs not on an NVSwitch fabric, or its registration not complete) report
nothing.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from fuzzball_core.scheduling import NVLINK_DOMAIN

log = logging.getLogger("fuzzball.plugins.nvidia")

#: a GPU's attributes: its fabric's cluster UUID and clique id, and the two as one domain
CLUSTER_UUID = "nvlink.cluster-uuid"
CLIQUE_ID = "nvlink.clique-id"
#: NVML's ``NVML_GPU_FABRIC_STATE_COMPLETED``: the GPU's fabric registration finished
FABRIC_STATE_COMPLETED = 3
#: NVML's ``NVML_SUCCESS``
NVML_SUCCESS = 0


def load_nvml() -> Any | None:
    """nvidia-ml-py's ``pynvml``, initialised; None without it or without a driver."""
    try:
        import pynvml  # nvidia-ml-py: optional, only GPU nodes have it
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, _DriverNotLoaded...
        log.info("NVML is not usable here (%s); no NVLink fabric is reported", exc)
        return None
    return pynvml


def domain(cluster_uuid: str, clique_id: int) -> str:
    """The NVLink domain of a fabric cluster and clique: ``<cluster uuid>.<clique id>``."""
    return f"{cluster_uuid}.{clique_id}"


def fabric_attributes(nvml: Any) -> dict[int, dict[str, str]]:
    """Each GPU's fabric attributes by its device minor number (``/dev/nvidia<minor>``);
    GPUs whose fabric registration is not complete, or that have none, are left out."""
    found: dict[int, dict[str, str]] = {}
    for index in range(nvml.nvmlDeviceGetCount()):
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        try:
            info = nvml.nvmlDeviceGetGpuFabricInfo(handle)
        except Exception as exc:  # NVMLError_NotSupported: no NVSwitch fabric
            log.debug("GPU %d reports no fabric: %s", index, exc)
            continue
        if info.state != FABRIC_STATE_COMPLETED or info.status != NVML_SUCCESS:
            continue
        cluster = str(uuid.UUID(bytes=bytes(info.clusterUuid)[:16]))
        found[int(nvml.nvmlDeviceGetMinorNumber(handle))] = {
            CLUSTER_UUID: cluster,
            CLIQUE_ID: str(int(info.cliqueId)),
            NVLINK_DOMAIN: domain(cluster, int(info.cliqueId)),
        }
    return found
