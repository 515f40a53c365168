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

Besides the partition, the image's config is read from its metadata objects
(:func:`image_config`): over range requests when Orchestrate pins the image, from the pulled
file on a node; the node adds what the unpacked tree says (:func:`with_env_scripts`).
"""

from __future__ import annotations

import json
import stat
import struct
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from fuzzball_core.drivers import ImageConfig
from fuzzball_core.errors import InvalidArgument

HEADER = struct.Struct("<32s10s3s3s16s8q")
DESCRIPTOR = struct.Struct("<i?III7q128s384s")
PARTITION_EXTRA = struct.Struct("<ii3s")
MAGIC = b"SIF_MAGIC\x00"

DATA_DEFFILE = 0x4001
DATA_PARTITION = 0x4004
DATA_GENERIC_JSON = 0x4006
#: the JSON object Apptainer keeps the source image's OCI config in
OCI_CONFIG_NAME = "oci-config.json"
#: where Apptainer puts a definition file's %runscript inside the image
RUNSCRIPT = "/.singularity.d/runscript"
#: where Apptainer keeps the environment scripts its actions source before the command
#: (90-environment.sh from ``%environment``, 10-docker2singularity.sh from a docker base...)
ENV_SCRIPTS_DIR = "/.singularity.d/env"
#: the shell that sources them
SHELL = "/bin/sh"
#: metadata objects (the config, the definition file) read into memory at most this big
MAX_METADATA_BYTES = 1 << 20
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


@dataclass(frozen=True)
class SifObject:
    """One used data object of the descriptor table."""

    data_type: int
    offset: int
    size: int
    name: str
    extra: bytes


#: reads ``length`` bytes at ``offset`` of a SIF (a local file, or a blob in a registry)
Reader = Callable[[int, int], bytes]


def file_reader(path: Path) -> Reader:
    """A :data:`Reader` over the local file ``path``."""

    def read(offset: int, length: int) -> bytes:
        with path.open("rb") as sif:
            sif.seek(offset)
            return sif.read(length)

    return read


def read_objects(read: Reader, total_size: int, *, what: str) -> list[SifObject]:
    """The used data objects of the SIF read by ``read`` (``total_size`` bytes long)."""
    header = parse_header(read(0, HEADER.size), what=what)
    table_size = header.descriptors_total * DESCRIPTOR.size
    if header.descriptors_offset + table_size > total_size:
        raise InvalidArgument(f"{what} is truncated (descriptor table past the end)")
    table = read(header.descriptors_offset, table_size)
    if len(table) < table_size:
        raise InvalidArgument(f"{what} is truncated (descriptor table past the end)")
    objects = []
    for index in range(header.descriptors_total):
        fields = DESCRIPTOR.unpack_from(table, index * DESCRIPTOR.size)
        data_type, used, offset, size = fields[0], fields[1], fields[5], fields[6]
        if not used:
            continue
        if offset < 0 or size < 0 or offset + size > total_size:
            raise InvalidArgument(f"{what} has a data object outside the file")
        objects.append(SifObject(data_type, offset, size, _text(fields[12]), fields[13]))
    return objects


def primary_partition(path: Path) -> SifPartition:
    """Find the primary system partition of the SIF file at ``path``.

    Raises ``InvalidArgument`` when there is none or it is not plain squashfs.
    """
    what = f"SIF image {path.name}"
    partitions = []
    for item in read_objects(file_reader(path), path.stat().st_size, what=what):
        if item.data_type != DATA_PARTITION:
            continue
        if item.size <= 0:
            raise InvalidArgument(f"{what} has a partition outside the file")
        fs_type, partition_type, arch = PARTITION_EXTRA.unpack_from(item.extra)
        code = _text(arch)
        partitions.append(
            SifPartition(
                item.offset, item.size, fs_type, partition_type, ARCHITECTURES.get(code, code)
            )
        )
    primary = next((p for p in partitions if p.partition_type == PART_PRIMARY_SYSTEM), None)
    if primary is None:
        raise InvalidArgument(f"{what} has no primary system partition")
    if primary.fs_type != FS_SQUASHFS:
        raise InvalidArgument(
            f"{what}: the primary partition is {primary.fs_name}; only squashfs is supported"
        )
    return primary


def image_config(read: Reader, total_size: int, *, what: str) -> ImageConfig:
    """What the SIF says about running it, as Apptainer keeps it.

    The ``oci-config.json`` JSON object (Apptainer and SingularityCE write the source
    image's OCI config there when they build from a docker or OCI image) gives Env,
    Entrypoint, Cmd, WorkingDir and User. A definition file whose ``%runscript`` section
    has a body makes the runscript (``/.singularity.d/runscript``, where the build put it)
    the command, replacing the OCI Entrypoint and Cmd as ``apptainer run`` does. A SIF with
    neither has an empty config.
    """
    config = ImageConfig()
    objects = read_objects(read, total_size, what=what)
    oci = next(
        (o for o in objects if o.data_type == DATA_GENERIC_JSON and o.name == OCI_CONFIG_NAME),
        None,
    )
    if oci is not None:
        try:
            document = json.loads(_small_object(read, oci, what))
        except ValueError:
            raise InvalidArgument(f"{what}: {OCI_CONFIG_NAME} is not JSON") from None
        if not isinstance(document, dict):
            raise InvalidArgument(f"{what}: {OCI_CONFIG_NAME} is not a JSON object")
        config = ImageConfig.from_oci(document)
    deffile = next((o for o in objects if o.data_type == DATA_DEFFILE), None)
    if deffile is not None and _has_runscript(_small_object(read, deffile, what)):
        config = replace(config, entrypoint=None, cmd=(RUNSCRIPT,))
    return config


def _small_object(read: Reader, item: SifObject, what: str) -> bytes:
    if item.size > MAX_METADATA_BYTES:
        raise InvalidArgument(
            f"{what}: its {item.name or 'metadata'} object is over {MAX_METADATA_BYTES} bytes"
        )
    return read(item.offset, item.size)


def _has_runscript(deffile: bytes) -> bool:
    """Whether the definition file's ``%runscript`` section has a body."""
    body: list[str] = []
    inside = False
    for line in deffile.decode("utf-8", "replace").splitlines():
        if line.startswith("%"):
            inside = line.split(None, 1)[0].lower() == "%runscript"
            continue
        if inside:
            body.append(line)
    return any(line.strip() and not line.strip().startswith("#") for line in body)


def with_env_scripts(config: ImageConfig, root: Path) -> ImageConfig:
    """``config`` with the environment scripts of the image tree unpacked at ``root``.

    Those are the files ``/.singularity.d/env/*.sh`` (symlinks followed inside the tree, as
    the shell that sources them would), in the order Apptainer's actions source them; with
    them, whether ``/bin/sh`` is an executable file there. No scripts (an image not built
    by Apptainer) are noted as none, so that a config never looked at can be told apart.
    """
    # only a node unpacks a tree: Orchestrate, which pins SIFs, never loads the runtime
    from fuzzball_runtime.layers import follow_in_root

    directory = follow_in_root(root, ENV_SCRIPTS_DIR)
    scripts = tuple(
        sorted(
            entry.name
            for entry in (directory.iterdir() if directory.is_dir() else ())
            if entry.name.endswith(".sh")
            and follow_in_root(root, f"{ENV_SCRIPTS_DIR}/{entry.name}").is_file()
        )
    )
    if not scripts:
        return replace(config, env_scripts=())
    return replace(config, env_scripts=scripts, env_shell=_executable(follow_in_root(root, SHELL)))


def _executable(path: Path) -> bool:
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return False
    return stat.S_ISREG(mode) and bool(mode & 0o111)
