"""Where a volume's directory is under a driver's root: one subdirectory per organization,
then per volume (or per workflow, then volume name, for per-workflow volumes).

Every path component is checked as a plain name (no separators, no dot-dot), and the
result is checked to lie under the root after resolving symlinks, so a volume cannot reach
outside its driver's tree however its ids read.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

from fuzzball_core.drivers import VolumeLocation
from fuzzball_core.errors import InvalidArgument, Unavailable

_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")

#: the organization directory of volumes that belong to none (cluster service accounts)
NO_ORGANIZATION = "no-organization"

#: organization directories: traversable, not listable, by others (the volume directories
#: below carry their own permissions)
ORGANIZATION_MODE = 0o711


def component(kind: str, name: str) -> str:
    """``name`` if it is a plain directory name; InvalidArgument naming ``kind`` otherwise."""
    if not _SAFE_NAME.fullmatch(name) or name in (".", ".."):
        raise InvalidArgument(f"{kind} {name!r}: not a valid directory name")
    return name


def relative_path(location: VolumeLocation) -> Path:
    """The volume's path below a driver's root: ``ORG/VOLUME_ID`` for a persistent volume,
    ``ORG/workflows/WORKFLOW_ID/NAME`` for a per-workflow one."""
    organization = component("organization", location.organization_id or NO_ORGANIZATION)
    if location.volume_id:
        return Path(organization) / component("volume id", location.volume_id)
    if not location.workflow_id:
        raise InvalidArgument("volume location: a per-workflow volume needs its workflow id")
    return (
        Path(organization)
        / "workflows"
        / component("workflow id", location.workflow_id)
        / component("volume", location.name)
    )


def make_directory(root: Path, location: VolumeLocation, mode: int = 0o700) -> Path:
    """Create (if needed) and answer ``location``'s directory under ``root``, with the
    organization directory at :data:`ORGANIZATION_MODE` and a new volume directory at
    ``mode``; InvalidArgument if it would resolve outside ``root``."""
    relative = relative_path(location)
    root.mkdir(parents=True, exist_ok=True)
    organization_dir = root / relative.parts[0]
    organization_dir.mkdir(exist_ok=True)
    contained(root, organization_dir)  # before its mode is set: a symlink is followed
    organization_dir.chmod(ORGANIZATION_MODE)
    path = root / relative
    contained(root, path)
    if not path.is_dir():
        path.mkdir(parents=True, mode=mode)
        path.chmod(mode)
    return contained(root, path)


def contained(root: Path, path: Path) -> Path:
    """``path`` if it resolves (symlinks followed) inside ``root``; InvalidArgument if not."""
    resolved_root = root.resolve()
    resolved = path.resolve()
    if resolved != resolved_root and resolved_root not in resolved.parents:
        raise InvalidArgument(f"volume path {path} leads outside {root}")
    return path


def remove_tree(path: Path) -> None:
    """Delete the volume directory ``path`` and all it holds (nothing when it is not there).
    Deletes what it can; Unavailable naming the path and the first reason when the directory
    is still there afterwards, so that a failed delete is never reported as done."""
    failures: list[OSError] = []

    def note(_function: Any, _path: str, error: Any) -> None:
        failure = error[1] if isinstance(error, tuple) else error
        if not isinstance(failure, FileNotFoundError):
            failures.append(failure)

    shutil.rmtree(path, onerror=note)  # onexc from Python 3.12; onerror still works there
    if os.path.lexists(path):
        reason = failures[0] if failures else "it is still there"
        raise Unavailable(f"volume directory {path}: could not be deleted: {reason}")
