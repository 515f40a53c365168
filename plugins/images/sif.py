"""Read the Singularity Image Format (SIF) container that Apptainer images come in.

Layout (github.com/sylabs/sif, all integers little-endian, structures packed):

* global header, 128 bytes: launch script [32], magic ``SIF_MAGIC\\0`` [10], version [3],
  primary architecture [3] (``"02"`` = amd64 ...), UUID [16], then eight int64: created,
  modified, free descriptors, total descriptors, descriptors offset, descriptors size,
  data offset, data size;
* descriptors, 585 bytes each: data type int32, used bool, id uint32, group id uint32, linked
  id uint32, then int64 offset, size, size with padding, created, modified, uid, gid, name
  [128] and type-specific extra [384] (for a partition: fs type int32, partition type int32,
  architecture [3]).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from fuzzball_core.errors import InvalidArgument

HEADER = struct.Struct("<32s10s3s3s16s8q")
DESCRIPTOR = struct.Struct("<i?III7q128s384s")
PARTITION_EXTRA = struct.Struct("<ii3s")
MAGIC = b"SIF_MAGIC\x00"

DATA_PARTITION = 0x4004
FS_SQUASHFS = 1
FS_ENCRYPTED_SQUASHFS = 5
PART_PRIMARY_SYSTEM = 2
_FS_NAMES = {1: "squashfs", 2: "ext3", 3: "archive", 4: "raw", 5: "encrypted squashfs"}

#: SIF architecture codes -> GOARCH names
ARCHITECTURES = {
    "01": "386",
    "02": "amd64",
    "03": "arm",
    "04": "arm64",
    "05": "ppc64",
    "06": "ppc64le",
    "07": "mips",
    "08": "mipsle",
    "09": "mips64",
    "10": "mips64le",
    "11": "s390x",
}


@dataclass(frozen=True)
class SifHeader:
    """The fields of the global header that readers need."""

    architecture: str
    descriptors_total: int
    descriptors_offset: int
    descriptors_size: int


@dataclass(frozen=True)
class SifPartition:
    """A file-system partition data object."""

    offset: int
    size: int
    fs_type: int
    partition_type: int
    architecture: str

    @property
    def fs_name(self) -> str:
        """The file system's name, for messages."""
        return _FS_NAMES.get(self.fs_type, f"type {self.fs_type}")


def _text(raw: bytes) -> str:
    return raw.split(b"\x00", 1)[0].decode("ascii", "replace")


def parse_header(data: bytes, *, what: str = "SIF file") -> SifHeader:
    """Parse the 128-byte global header (the start of a SIF file is enough)."""
    if len(data) < HEADER.size:
        raise InvalidArgument(f"{what} is too short to be a SIF image")
    fields = HEADER.unpack_from(data)
    if fields[1] != MAGIC:
        raise InvalidArgument(f"{what} is not a SIF image (bad magic)")
    code = _text(fields[3])
    return SifHeader(
        architecture=ARCHITECTURES.get(code, f"unknown({code})"),
        descriptors_total=fields[8],
        descriptors_offset=fields[9],
        descriptors_size=fields[10],
    )


def primary_partition(path: Path) -> SifPartition:
    """Find the primary system partition of the SIF file at ``path``.

    Raises ``InvalidArgument`` when there is none or it is not plain squashfs.
    """
    what = f"SIF image {path.name}"
    file_size = path.stat().st_size
    with path.open("rb") as sif:
        header = parse_header(sif.read(HEADER.size), what=what)
        table_size = header.descriptors_total * DESCRIPTOR.size
        if header.descriptors_offset + table_size > file_size:
            raise InvalidArgument(f"{what} is truncated (descriptor table past the end)")
        sif.seek(header.descriptors_offset)
        table = sif.read(table_size)
    partitions = []
    for index in range(header.descriptors_total):
        fields = DESCRIPTOR.unpack_from(table, index * DESCRIPTOR.size)
        data_type, used, offset, size, extra = (
            fields[0],
            fields[1],
            fields[5],
            fields[6],
            fields[13],
        )
        if not used or data_type != DATA_PARTITION:
            continue
        fs_type, partition_type, arch = PARTITION_EXTRA.unpack_from(extra)
        if offset < 0 or size <= 0 or offset + size > file_size:
            raise InvalidArgument(f"{what} has a partition outside the file")
        code = _text(arch)
        partitions.append(
            SifPartition(offset, size, fs_type, partition_type, ARCHITECTURES.get(code, code))
        )
    primary = next((p for p in partitions if p.partition_type == PART_PRIMARY_SYSTEM), None)
    if primary is None:
        raise InvalidArgument(f"{what} has no primary system partition")
    if primary.fs_type != FS_SQUASHFS:
        raise InvalidArgument(
            f"{what}: the primary partition is {primary.fs_name}; only squashfs is supported"
        )
    return primary
