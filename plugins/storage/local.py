"""The ``local`` storage driver: a persistent volume kept on one node's disk, beneath the
node's Substrate work directory (``WORK_DIR/volumes/ORG/VOLUME``). Orchestrate places every
job using it on the node that holds it. A persistent volume whose class has a ``capacity``
is its own filesystem of that size (:mod:`.quota`), so jobs cannot write past it."""

from __future__ import annotations

from pathlib import Path

from fuzzball_core.drivers import StorageDriver, VolumeLocation
from fuzzball_plugins.storage import quota
from fuzzball_plugins.storage.layout import (
    contained,
    make_directory,
    relative_path,
    remove_tree,
)

#: the node-local volumes' tree under the work directory
LOCAL_ROOT = "volumes"


class LocalDriver(StorageDriver):
    """Node-local volumes: not shared; persistent ones pin their jobs to their node and are
    held to their class's capacity."""

    node_local = True
    enforces_capacity = True

    def directory(self, location: VolumeLocation, *, work_dir: Path) -> Path:
        """``WORK_DIR/volumes/ORG/VOLUME``, created if new; with a capacity, the mount point
        of the volume's own filesystem of that size (a per-workflow volume is checked only
        before its ingress). A capacity raised since is not applied here (jobs may be using
        the volume): :meth:`fit_capacity` grows it."""
        path = make_directory(work_dir / LOCAL_ROOT, location)
        if location.capacity_bytes and location.persistent:
            quota.hold_within(path, location.capacity_bytes)
        return path

    def fit_capacity(self, location: VolumeLocation, *, work_dir: Path) -> None:
        """Grow the volume's filesystem to a capacity raised since it was made (the node
        calls this only while no job of it uses the volume)."""
        if location.capacity_bytes and location.persistent:
            root = work_dir / LOCAL_ROOT
            path = contained(root, root / relative_path(location))
            quota.grow_to(path, location.capacity_bytes)

    def remove(self, location: VolumeLocation, *, work_dir: Path) -> None:
        """Delete the volume's directory on this node (and its filesystem image, unmounted)."""
        root = work_dir / LOCAL_ROOT
        path = contained(root, root / relative_path(location))
        quota.release(path)
        remove_tree(path)
