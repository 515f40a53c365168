"""How much disk a volume's data uses, measured on the node as a run that mounted it ends.

Like ``du``: the blocks allocated to every file and directory below the volume's directory
(symlinks not followed, a file with several hard links counted once), so the size is what
the volume costs the filesystem. A large tree is measured within a time bound: a volume not
measured in time is left out of the report (its last size stands) rather than holding up the
run's exit report.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path

#: Seconds one volume's measurement may take before it is given up.
MEASURE_SECONDS = 10.0

#: ``st_blocks`` counts 512-byte units whatever the filesystem's block size.
_BLOCK = 512


def disk_usage(root: Path, *, budget: float = MEASURE_SECONDS) -> int | None:
    """Bytes allocated below ``root`` (``root`` included); None when the walk takes longer
    than ``budget`` seconds or ``root`` is not a directory."""
    deadline = time.monotonic() + budget
    try:
        total = os.lstat(root).st_blocks * _BLOCK
    except OSError:
        return None
    seen: set[tuple[int, int]] = set()
    pending = [root]
    while pending:
        if time.monotonic() > deadline:
            return None
        try:
            entries = list(os.scandir(pending.pop()))
        except OSError:
            continue  # removed while walking, or unreadable: what is readable is counted
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if info.st_nlink > 1:
                if (info.st_dev, info.st_ino) in seen:
                    continue
                seen.add((info.st_dev, info.st_ino))
            total += info.st_blocks * _BLOCK
            if entry.is_dir(follow_symlinks=False):
                pending.append(Path(entry.path))
    return total


def measured(directories: Mapping[str, Path], *, budget: float = MEASURE_SECONDS) -> dict[str, int]:
    """``{volume id: bytes}`` of each directory measured within ``budget`` seconds."""
    sizes = {}
    for volume_id, directory in directories.items():
        size = disk_usage(directory, budget=budget)
        if size is not None:
            sizes[volume_id] = size
    return sizes
