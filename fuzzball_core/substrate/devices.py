"""The node's devices: discovered through the device plugins, handed out to jobs.

At start-up every ``fuzzball_node_discover_devices`` implementation reports what it finds;
the node advertises one resource per device kind. ``substrate.devices`` in the configuration
overrides a kind's count (devices it names beyond those discovered exist only as counts,
without device nodes). Each job gets concrete devices of the kinds and counts it asked for,
which ``fuzzball_job_prepare_container`` then wires into its container.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from fuzzball_core.hookspecs import Device

log = logging.getLogger("fuzzball.substrate")


def discover_devices(hooks: Any, node_config: Mapping[str, Any]) -> tuple[list[Device], bool]:
    """Every device the plugins report, and whether a plugin failed (it is logged)."""
    try:
        found = hooks.fuzzball_node_discover_devices(node_config=node_config)
    except Exception as exc:  # a broken plugin must not keep the node from registering
        log.error("device discovery failed: %s: %s", type(exc).__name__, exc)
        return [], True
    return [device for result in found for device in (result or ())], False


def device_annotations(devices: Sequence[Device]) -> dict[str, str]:
    """The node annotations its devices' attributes make: every attribute with a qualified
    name (``nvidia.com/nvlink-domain``: a ``/`` in it) on which all the devices carrying it
    agree. Devices that disagree (GPUs of two NVLink domains in one node) make none, said
    in the log."""
    values: dict[str, set[str]] = {}
    for device in devices:
        for key, value in device.attributes.items():
            if "/" in key:
                values.setdefault(key, set()).add(value)
    annotations = {}
    for key, found in sorted(values.items()):
        if len(found) == 1:
            annotations[key] = found.pop()
        else:
            log.warning("devices disagree on %s (%s): no such node annotation", key, sorted(found))
    return annotations


class DevicePool:
    """Free and allocated devices of each kind on this node. Thread-safe."""

    def __init__(self, devices: Sequence[Device], counts: Mapping[str, int]) -> None:
        by_kind: dict[str, list[Device]] = {}
        for device in devices:
            by_kind.setdefault(device.kind, []).append(device)
        for kind, count in counts.items():
            known = by_kind.setdefault(kind, [])
            del known[count:]
            known.extend(Device(kind, f"{kind}-{i}") for i in range(len(known), count))
        self._free = by_kind
        self._held: dict[int, list[Device]] = {}
        self._lock = threading.Lock()

    def capacity(self) -> dict[str, int]:
        """Devices of each kind, for registration."""
        with self._lock:
            held: dict[str, int] = {}
            for devices in self._held.values():
                for device in devices:
                    held[device.kind] = held.get(device.kind, 0) + 1
            return {k: len(v) + held.get(k, 0) for k, v in self._free.items() if v or held.get(k)}

    def allocate(self, run_id: int, wanted: Mapping[str, int]) -> list[Device]:
        """Take the devices run ``run_id`` asked for (as many as are free of each kind)."""
        taken: list[Device] = []
        with self._lock:
            for kind, count in wanted.items():
                free = self._free.get(kind, [])
                taken.extend(free[:count])
                del free[:count]
            if taken:
                self._held[run_id] = taken
        return taken

    def release(self, run_id: int) -> None:
        """Give run ``run_id``'s devices back."""
        with self._lock:
            for device in self._held.pop(run_id, []):
                self._free.setdefault(device.kind, []).append(device)
