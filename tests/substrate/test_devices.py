"""Devices the node offers and hands out to jobs."""

from __future__ import annotations

from typing import Any

import pluggy

from fuzzball_core import hookspecs
from fuzzball_core.hookspecs import Device, hookimpl
from fuzzball_core.substrate.devices import DevicePool, discover_devices

GPU = "nvidia.com/gpu"


def _gpus(count: int) -> list[Device]:
    return [Device(GPU, str(i), (f"/dev/nvidia{i}",)) for i in range(count)]


def test_capacity_counts_discovered_devices_per_kind() -> None:
    pool = DevicePool([*_gpus(2), Device("example.com/fpga", "0")], {})

    assert pool.capacity() == {GPU: 2, "example.com/fpga": 1}


def test_configured_counts_override_discovery() -> None:
    pool = DevicePool(_gpus(4), {GPU: 1, "example.com/fpga": 2})

    assert pool.capacity() == {GPU: 1, "example.com/fpga": 2}


def test_allocated_devices_are_not_given_twice_until_released() -> None:
    pool = DevicePool(_gpus(2), {})

    first = pool.allocate(1, {GPU: 1})
    second = pool.allocate(2, {GPU: 1})
    third = pool.allocate(3, {GPU: 1})
    pool.release(1)
    fourth = pool.allocate(4, {GPU: 1})

    assert first != second and third == []
    assert fourth == first
    assert pool.capacity() == {GPU: 2}


class _FakeGpuPlugin:
    @hookimpl
    def fuzzball_node_discover_devices(self, node_config: Any) -> list[Device]:
        return _gpus(1)


class _BrokenPlugin:
    @hookimpl
    def fuzzball_node_discover_devices(self, node_config: Any) -> list[Device]:
        raise RuntimeError("driver not loaded")


def _hooks(*plugins: object) -> Any:
    manager = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    manager.add_hookspecs(hookspecs)
    for plugin in plugins:
        manager.register(plugin)
    return manager.hook


def test_discovery_concatenates_every_plugins_devices() -> None:
    assert discover_devices(_hooks(_FakeGpuPlugin(), _FakeGpuPlugin()), {}) == (
        _gpus(1) * 2,
        False,
    )


def test_a_failing_device_plugin_is_reported_not_raised() -> None:
    assert discover_devices(_hooks(_FakeGpuPlugin(), _BrokenPlugin()), {}) == ([], True)
