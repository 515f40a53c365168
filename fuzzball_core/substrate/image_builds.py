"""A workflow-built image on the node: the base prepared, the result sealed into EROFS.

The build's ``post`` script runs as root in an ordinary job container whose writable layer
lives in a host directory (``ContainerSpec.scratch_dir``). The definition's ``files`` are
written into that upper layer before the container starts. Afterwards the upper layer is
stacked read-only on the base image (overlayfs honours its whiteouts and opaque
directories as it would in a container) and the merged view becomes the image's EROFS file.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

from fuzzball_core.errors import Internal, InvalidArgument
from fuzzball_runtime.erofs import build_from_dir
from fuzzball_runtime.layers import resolve_in_root

#: files the runtime writes into every container's root; the image keeps the base's own
_RUNTIME_FILES = ("etc/hosts", "etc/resolv.conf")


def write_files(upper: Path, files: Mapping[str, str]) -> None:
    """Write the definition's ``files`` (absolute path -> content) into the upper layer."""
    upper.mkdir(parents=True, exist_ok=True)
    for path, content in files.items():
        if not path.startswith("/"):
            raise InvalidArgument(f"files.{path}: the path must be absolute")
        target = resolve_in_root(upper, path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)


def seal(base: Path, scratch: Path, out: Path) -> Path:
    """Build the EROFS file ``out`` from ``base`` with the upper layer under ``scratch``."""
    upper = scratch / "upper"
    for leftover in _RUNTIME_FILES:
        (upper / leftover).unlink(missing_ok=True)
    lower = scratch / "base"
    merged = scratch / "merged"
    lower.mkdir(exist_ok=True)
    merged.mkdir(exist_ok=True)
    _run(["mount", "-t", "erofs", "-o", "ro,loop", str(base), str(lower)])
    try:
        _run(
            ["mount", "-t", "overlay", "overlay", "-o", f"ro,lowerdir={upper}:{lower}", str(merged)]
        )
        try:
            return build_from_dir(merged, out)
        finally:
            _run(["umount", str(merged)])
    finally:
        _run(["umount", str(lower)])


def _run(command: list[str]) -> None:
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise Internal(f"{' '.join(command)} failed: {result.stderr.strip()}")
