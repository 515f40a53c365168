"""The ``hostpath`` storage driver: volumes in a directory tree every node sees at the same
path (an NFS, Lustre or GPFS mount the site made shared), one subdirectory per organization
and per volume. Its storage class names the tree with the parameter ``root``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from fuzzball_core.drivers import StorageDriver, VolumeLocation
from fuzzball_core.errors import InvalidArgument
from fuzzball_plugins.storage.layout import (
    contained,
    make_directory,
    relative_path,
    remove_tree,
)

ROOT_PARAMETER = "root"


class HostPathDriver(StorageDriver):
    """Volumes under the class's ``root`` on every node: shared between nodes."""

    shared = True

    def check_parameters(self, parameters: Mapping[str, str]) -> list[tuple[str, str]]:
        """``root`` is required and absolute; no other parameter is known."""
        problems = [
            (name, f"unknown parameter of the hostpath driver (known: {ROOT_PARAMETER})")
            for name in sorted(parameters)
            if name != ROOT_PARAMETER
        ]
        root = parameters.get(ROOT_PARAMETER, "")
        if not root.startswith("/") or "/../" in f"{root}/":
            problems.append((ROOT_PARAMETER, "must be an absolute path (the shared tree's root)"))
        return problems

    def _root(self, location: VolumeLocation) -> Path:
        root = location.parameters.get(ROOT_PARAMETER, "")
        if not root.startswith("/"):
            raise InvalidArgument(
                f"storage class {location.storage_class}: parameters.root must be absolute"
            )
        return Path(root)

    def directory(self, location: VolumeLocation, *, work_dir: Path) -> Path:
        """``ROOT/ORG/VOLUME`` (or ``ROOT/ORG/workflows/WORKFLOW/NAME``), created if new."""
        return make_directory(self._root(location), location)

    def remove(self, location: VolumeLocation, *, work_dir: Path) -> None:
        """Delete the volume's directory from the shared tree."""
        root = self._root(location)
        path = contained(root, root / relative_path(location))
        remove_tree(path)
