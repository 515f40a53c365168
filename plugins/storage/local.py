"""The ``local`` storage driver: a persistent volume kept on one node's disk, beneath the
node's Substrate work directory (``WORK_DIR/volumes/ORG/VOLUME``). Orchestrate places every
job using it on the node that holds it."""

from __future__ import annotations

import shutil
from pathlib import Path

from fuzzball_core.drivers import StorageDriver, VolumeLocation
from fuzzball_plugins.storage.layout import contained, make_directory, relative_path

#: the node-local volumes' tree under the work directory
LOCAL_ROOT = "volumes"


class LocalDriver(StorageDriver):
    """Node-local volumes: not shared; persistent ones pin their jobs to their node."""

    node_local = True

    def directory(self, location: VolumeLocation, *, work_dir: Path) -> Path:
        """``WORK_DIR/volumes/ORG/VOLUME``, created if new."""
        return make_directory(work_dir / LOCAL_ROOT, location)

    def remove(self, location: VolumeLocation, *, work_dir: Path) -> None:
        """Delete the volume's directory on this node."""
        root = work_dir / LOCAL_ROOT
        shutil.rmtree(contained(root, root / relative_path(location)), ignore_errors=True)
