"""The ``ephemeral`` storage driver: a per-workflow directory on each node,
``WORK_DIR/workflows/WORKFLOW/volumes/NAME``, removed some time after the workflow's last
run there (Substrate's :class:`~fuzzball_core.substrate.volumes.WorkflowVolumes` keeps that
time). Not shared: Orchestrate co-locates the jobs of a workflow that use one."""

from __future__ import annotations

import shutil
from pathlib import Path

from fuzzball_core.drivers import StorageDriver, VolumeLocation
from fuzzball_core.errors import InvalidArgument
from fuzzball_plugins.storage.layout import component, contained


class EphemeralDriver(StorageDriver):
    """Per-workflow node-local directories (persistent classes cannot use it)."""

    def _path(self, location: VolumeLocation, work_dir: Path) -> Path:
        if location.volume_id or not location.workflow_id:
            raise InvalidArgument(
                f"storage class {location.storage_class}: the ephemeral driver keeps only "
                "per-workflow volumes"
            )
        root = work_dir / "workflows"
        path = root / component("workflow id", location.workflow_id) / "volumes"
        return contained(root, path / component("volume", location.name))

    def directory(self, location: VolumeLocation, *, work_dir: Path) -> Path:
        """The workflow's volume directory on this node, created if new."""
        path = self._path(location, work_dir)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def remove(self, location: VolumeLocation, *, work_dir: Path) -> None:
        """Delete the volume's directory on this node."""
        shutil.rmtree(self._path(location, work_dir), ignore_errors=True)
