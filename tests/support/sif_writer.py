"""Write SIF files (Apptainer's image format) for tests: a definition file, JSON objects (as
Apptainer keeps an OCI source's config in ``oci-config.json``) and a squashfs.

Follows the published layout of github.com/sylabs/sif: a 128-byte global header, a table of
585-byte descriptors, then the data objects (the squashfs partition aligned to 4 KiB).
"""

from __future__ import annotations

import struct
import subprocess
import time
import uuid
from pathlib import Path

HEADER = struct.Struct("<32s10s3s3s16s8q")
DESCRIPTOR = struct.Struct("<i?III7q128s384s")
PARTITION_EXTRA = struct.Struct("<ii3s")
ARCH_CODES = {"amd64": b"02", "arm64": b"04"}
DESCRIPTORS_TOTAL = 48
DATA_OFFSET = 32768
DATA_DEFFILE, DATA_PARTITION, DATA_GENERIC_JSON = 0x4001, 0x4004, 0x4006
DEFFILE = b"bootstrap: docker\nfrom: busybox\n"
FS_SQUASHFS, PART_PRIMARY_SYSTEM = 1, 2
GROUP = 0xF0000001


def _descriptor(
    data_type: int,
    object_id: int,
    offset: int,
    size: int,
    padded: int,
    extra: bytes,
    name: bytes = b"",
) -> bytes:
    now = int(time.time())
    return DESCRIPTOR.pack(
        data_type, True, object_id, GROUP, 0, offset, size, padded, now, now, 0, 0, name, extra
    )


def write_sif(
    rootfs: Path,
    out: Path,
    *,
    arch: str = "amd64",
    deffile: bytes = DEFFILE,
    json_objects: dict[str, bytes] | None = None,
) -> Path:
    """Pack the directory ``rootfs`` into squashfs and wrap it as a SIF file at ``out``, with
    the definition file ``deffile`` and ``json_objects`` (name -> content) before it."""
    squashfs = out.with_suffix(".squashfs")
    subprocess.run(
        ["mksquashfs", str(rootfs), str(squashfs), "-noappend", "-quiet", "-no-progress"],
        check=True,
        capture_output=True,
    )
    partition = squashfs.read_bytes()
    arch_code = ARCH_CODES[arch] + b"\x00"
    metadata = [(DATA_DEFFILE, b"", deffile)] + [
        (DATA_GENERIC_JSON, name.encode(), data) for name, data in (json_objects or {}).items()
    ]
    descriptors = []
    offsets = []
    offset = DATA_OFFSET
    for index, (data_type, name, data) in enumerate(metadata, start=1):
        descriptors.append(_descriptor(data_type, index, offset, len(data), len(data), b"", name))
        offsets.append((offset, data))
        offset += len(data)
    partition_offset = (offset + 4095) // 4096 * 4096
    descriptors.append(
        _descriptor(
            DATA_PARTITION,
            len(metadata) + 1,
            partition_offset,
            len(partition),
            len(partition),
            PARTITION_EXTRA.pack(FS_SQUASHFS, PART_PRIMARY_SYSTEM, arch_code),
        )
    )
    table = b"".join(descriptors).ljust(DESCRIPTORS_TOTAL * DESCRIPTOR.size, b"\x00")
    now = int(time.time())
    data_size = partition_offset + len(partition) - DATA_OFFSET
    header = HEADER.pack(
        b"#!/usr/bin/env run-singularity\n",
        b"SIF_MAGIC\x00",
        b"01\x00",
        arch_code,
        uuid.uuid4().bytes,
        now,
        now,
        DESCRIPTORS_TOTAL - len(descriptors),
        DESCRIPTORS_TOTAL,
        HEADER.size,
        len(b"".join(descriptors)),
        DATA_OFFSET,
        data_size,
    )
    with out.open("wb") as sif:
        sif.write(header)
        sif.write(table)
        for at, data in offsets:
            sif.seek(at)
            sif.write(data)
        sif.seek(partition_offset)
        sif.write(partition)
    squashfs.unlink()
    return out
