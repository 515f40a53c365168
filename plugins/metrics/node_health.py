"""Node-health metric sources the monitoring stack's rules watch (issue 15), read from the
kernel on every scrape:

* ``fuzzball_node_memory_errors_total{controller, type}``: EDAC's corrected and uncorrected
  memory error counts per memory controller (``/sys/devices/system/edac/mc/mc*/ce_count``,
  ``ue_count``), when the kernel has an EDAC driver for the machine (nothing otherwise);
* ``fuzzball_node_disk_io_errors_total{device}``: I/O errors the SCSI layer counted per disk
  (``/sys/block/*/device/ioerr_cnt``, hexadecimal), for disks that have the counter;
* ``fuzzball_node_filesystem_readonly{mountpoint, device, fstype}``: 1 for a disk-backed
  filesystem mounted read-only, 0 for one mounted read-write (loop devices, which hold
  images, and pseudo filesystems are left out).

Each source reads a root it is given, so tests and sites can point it at a copy of the tree.
"""

from __future__ import annotations

import logging
from pathlib import Path

from fuzzball_core.hookspecs import hookimpl

log = logging.getLogger(__name__)

EDAC = Path("/sys/devices/system/edac/mc")
BLOCK = Path("/sys/block")
MOUNTS = Path("/proc/self/mounts")
#: EDAC's counter files and the ``type`` label of each
EDAC_COUNTERS = {"ce_count": "corrected", "ue_count": "uncorrected"}


def _read_number(path: Path, base: int = 10) -> int | None:
    try:
        return int(path.read_text().strip(), base)
    except (OSError, ValueError):
        return None


def memory_errors(root: Path = EDAC) -> dict[str, float]:
    """EDAC's error counts per memory controller (empty without EDAC)."""
    samples: dict[str, float] = {}
    if not root.is_dir():
        return samples
    for controller in sorted(root.glob("mc[0-9]*")):
        for name, kind in EDAC_COUNTERS.items():
            count = _read_number(controller / name)
            if count is not None:
                labels = f'controller="{controller.name}",type="{kind}"'
                samples[f"fuzzball_node_memory_errors_total{{{labels}}}"] = float(count)
    return samples


def disk_io_errors(root: Path = BLOCK) -> dict[str, float]:
    """I/O errors per disk that counts them (``ioerr_cnt`` is hexadecimal: ``0x1f``)."""
    samples: dict[str, float] = {}
    if not root.is_dir():
        return samples
    for disk in sorted(root.iterdir()):
        if disk.name.startswith(("loop", "ram")):
            continue
        count = _read_number(disk / "device" / "ioerr_cnt", 16)
        if count is not None:
            samples[f'fuzzball_node_disk_io_errors_total{{device="{disk.name}"}}'] = float(count)
    return samples


def _unescape_mount_field(field: str) -> str:
    # /proc/mounts writes space, tab, newline and backslash as octal escapes (\040)
    out, position = [], 0
    while position < len(field):
        if field[position] == "\\" and field[position + 1 : position + 4].isdigit():
            out.append(chr(int(field[position + 1 : position + 4], 8)))
            position += 4
        else:
            out.append(field[position])
            position += 1
    return "".join(out)


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def readonly_filesystems(mounts: Path = MOUNTS) -> dict[str, float]:
    """1 per disk-backed filesystem mounted read-only, 0 per one mounted read-write."""
    samples: dict[str, float] = {}
    try:
        lines = mounts.read_text().splitlines()
    except OSError:
        return samples
    for line in lines:
        parts = line.split()
        if len(parts) < 4:
            continue
        device, mountpoint, fstype, options = parts[:4]
        if not device.startswith("/dev/") or device.startswith("/dev/loop"):
            continue
        readonly = "ro" in options.split(",")
        key = (
            f'fuzzball_node_filesystem_readonly{{mountpoint="{_label(_unescape_mount_field(mountpoint))}"'
            f',device="{_label(_unescape_mount_field(device))}",fstype="{_label(fstype)}"}}'
        )
        samples[key] = 1.0 if readonly else 0.0
    return samples


def collect() -> dict[str, float]:
    """Every source above, from this machine's kernel."""
    return {**memory_errors(), **disk_io_errors(), **readonly_filesystems()}


@hookimpl
def fuzzball_node_collect_metrics() -> dict[str, float]:
    """Memory errors, disk I/O errors and read-only filesystems of this node."""
    return collect()
