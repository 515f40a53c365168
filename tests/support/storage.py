"""Storage test helpers: the installed storage driver plugins, as Orchestrate loads them."""

from __future__ import annotations

from fuzzball_core.drivers import StorageDriver
from fuzzball_core.plugins import get_registry


def plugin_driver(name: str) -> StorageDriver:
    """The installed ``fuzzball.storage_drivers`` plugin ``name``."""
    driver: StorageDriver = get_registry().driver("fuzzball.storage_drivers", name)
    return driver
