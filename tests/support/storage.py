"""Storage test helpers: the installed storage driver plugins, as Orchestrate loads them."""

from __future__ import annotations

import subprocess
from pathlib import Path

from fuzzball_core.drivers import StorageDriver
from fuzzball_core.plugins import get_registry


def plugin_driver(name: str) -> StorageDriver:
    """The installed ``fuzzball.storage_drivers`` plugin ``name``."""
    driver: StorageDriver = get_registry().driver("fuzzball.storage_drivers", name)
    return driver


def unmount_under(directory: Path) -> None:
    """Unmount whatever is still mounted beneath ``directory`` (volumes held to a capacity
    are loop-mounted filesystems; a test leaves none behind)."""
    for line in Path("/proc/self/mounts").read_text().splitlines():
        target = line.split()[1]
        if target.startswith(f"{directory}/"):
            subprocess.run(["umount", "--lazy", target], check=False)
