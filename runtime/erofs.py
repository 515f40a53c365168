"""EROFS images: built with ``mkfs.erofs`` (Debian erofs-utils), cached per content digest.

``build_from_dir(src, out)`` converts a tree; ``build_from_layers(tars, out)`` first applies
OCI layers (see :mod:`fuzzball_runtime.layers`); :class:`LayerBuild` does the same one layer at
a time, so a pull can apply each layer as soon as it is downloaded while later layers still
download; :class:`ImageCache` keeps one converted file per digest on the node, evicting the
least recently used beyond ``max_bytes``.

Compression ``auto`` (what a pull uses) samples the file contents as the layers are applied:
mkfs.erofs 1.5 tries lz4 on every 4 KiB cluster of every file and keeps the raw cluster when
it does not shrink, which costs about 30 ms of CPU per MB of already-compressed data (model
weights, archives, media) for an output of the very same size. So an image whose content
would not shrink is built without compression, and in one that would, the large files that
would not are named in a ``--compress-hints`` file with a physical cluster size of 0, which
mkfs.erofs reads as "store this file uncompressed".
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from fuzzball_core.errors import FailedPrecondition, InvalidArgument

from .errors import RuntimeFailure
from .layers import ContentSample, apply_layer

MKFS = "mkfs.erofs"
DEFAULT_COMPRESSION = "lz4"
#: compression chosen from the content: :data:`DEFAULT_COMPRESSION` unless a sample of the
#: files says it would save less than :data:`MIN_COMPRESSION_SAVING`
AUTO_COMPRESSION = "auto"
#: the least fraction of the sampled bytes compression must save to be worth its CPU
MIN_COMPRESSION_SAVING = 0.1
#: at most this many ``--compress-hints`` lines (mkfs.erofs matches every file it compresses
#: against each line's regular expression), each pattern at most this long (it reads
#: patterns of up to 4,095 characters)
MAX_HINT_LINES = 32
MAX_HINT_PATTERN = 3500
#: characters with a meaning in a POSIX extended regular expression
_ERE_SPECIAL = frozenset(".[]()*+?{}|^$\\")


class ImageBuildError(RuntimeFailure):
    """mkfs.erofs failed; the message carries its stderr."""


def mkfs_command(
    src: Path, out: Path, compression: str | None, hints: Path | None = None
) -> list[str]:
    """The mkfs.erofs invocation used for every conversion (``hints``: a compress-hints
    file, see :func:`write_compress_hints`)."""
    command = [MKFS, "--quiet"]
    if compression:
        command.append(f"-z{compression}")
        if hints is not None:
            command.append(f"--compress-hints={hints}")
    return [*command, str(out), str(src)]


def write_compress_hints(paths: Sequence[str], hints: Path) -> int:
    """Write a compress-hints file keeping ``paths`` (relative to the tree, as mkfs.erofs
    names them, most important first) uncompressed; returns how many it names.

    Paths are grouped into alternations, one per line; a path with white space cannot be
    written (the file's fields are separated by it) and stays compressed, as do those beyond
    :data:`MAX_HINT_LINES` lines.
    """
    lines: list[str] = []
    group: list[str] = []
    named = 0

    def close_group() -> None:
        if group:
            lines.append("0 ^(" + "|".join(group) + ")$")
            group.clear()

    for path in paths:
        if any(c.isspace() for c in path):
            continue
        escaped = "".join("\\" + c if c in _ERE_SPECIAL else c for c in path)
        if len(escaped) > MAX_HINT_PATTERN:
            continue
        if sum(len(g) + 1 for g in group) + len(escaped) > MAX_HINT_PATTERN:
            close_group()
            if len(lines) == MAX_HINT_LINES:
                break
        group.append(escaped)
        named += 1
    close_group()  # empty when the lines ran out
    hints.write_text("".join(f"{line}\n" for line in lines), errors="surrogateescape")
    return named


def build_from_dir(
    src: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    compression: str | None = DEFAULT_COMPRESSION,
    hints: Path | None = None,
) -> Path:
    """Convert the tree ``src`` into the EROFS file ``out`` (written atomically); ``hints``
    names files kept uncompressed (:func:`write_compress_hints`)."""
    source, target = Path(src), Path(out)
    if not source.is_dir():
        raise InvalidArgument(f"image source {source}: not a directory")
    if shutil.which(MKFS) is None:
        raise FailedPrecondition(f"{MKFS} not found: install Debian's erofs-utils")
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    result = subprocess.run(
        mkfs_command(source, partial, compression, hints),
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        partial.unlink(missing_ok=True)
        raise ImageBuildError(
            f"{MKFS} {source} -> {target} failed ({result.returncode}): "
            f"{result.stderr.strip() or result.stdout.strip()}"
        )
    os.replace(partial, target)
    return target


class LayerBuild:
    """An EROFS image built from OCI layers applied one at a time, lowest first.

    The layers are applied onto ``workdir/rootfs`` (``workdir`` must exist and be empty of
    a ``rootfs``; the caller removes it afterwards); :meth:`build` converts the tree.
    """

    def __init__(
        self, workdir: str | os.PathLike[str], *, compression: str | None = DEFAULT_COMPRESSION
    ) -> None:
        self.root = Path(workdir) / "rootfs"
        self.root.mkdir(mode=0o755)
        self.compression = compression
        # only `auto` needs to see the content
        self.sample = ContentSample() if compression == AUTO_COMPRESSION else None

    def apply(self, layer: str | os.PathLike[str]) -> None:
        """Apply the next layer tarball (any compression tarfile reads) onto the tree."""
        apply_layer(layer, self.root, sample=self.sample)

    def chosen_compression(self) -> str | None:
        """The compression :meth:`build` uses: ``auto`` resolved from the sampled content."""
        if self.sample is None:
            return self.compression
        if self.sample.saving() < MIN_COMPRESSION_SAVING:
            return None
        return DEFAULT_COMPRESSION

    def incompressible(self) -> list[str]:
        """The large files lz4 would not shrink, relative to the tree, largest first."""
        if self.sample is None:
            return []
        found = self.sample.incompressible(MIN_COMPRESSION_SAVING)
        return [str(path.relative_to(self.root)) for path in found if path.is_file()]

    def build(self, out: str | os.PathLike[str]) -> Path:
        """Convert the tree into the EROFS file ``out`` (written atomically)."""
        compression = self.chosen_compression()
        hints: Path | None = None
        if compression is not None:
            hints = self.root.parent / "compress-hints"
            if not write_compress_hints(self.incompressible(), hints):
                hints = None
        return build_from_dir(self.root, out, compression=compression, hints=hints)


def build_from_layers(
    layers: Sequence[str | os.PathLike[str]],
    out: str | os.PathLike[str],
    *,
    compression: str | None = DEFAULT_COMPRESSION,
    workdir: str | os.PathLike[str] | None = None,
) -> Path:
    """Apply the OCI layer tarballs in order (lowest first) and convert the result."""
    target = Path(out)
    with tempfile.TemporaryDirectory(prefix=".layers-", dir=workdir or target.parent) as staging:
        build = LayerBuild(staging, compression=compression)
        for layer in layers:
            build.apply(layer)
        return build.build(target)


def file_digest(path: str | os.PathLike[str]) -> str:
    """``sha256:<hex>`` of a file's content."""
    with open(path, "rb") as f:
        return "sha256:" + hashlib.file_digest(f, "sha256").hexdigest()


def layers_digest(layers: Sequence[str | os.PathLike[str]]) -> str:
    """Digest naming the image made of these layers in this order."""
    chain = hashlib.sha256()
    for layer in layers:
        chain.update(file_digest(layer).encode() + b"\n")
    return "sha256:" + chain.hexdigest()


class ImageCache:
    """Node-local EROFS files keyed by content digest, at most ``max_bytes`` in total."""

    def __init__(self, directory: str | os.PathLike[str], max_bytes: int) -> None:
        if max_bytes <= 0:
            raise InvalidArgument("image cache max_bytes: must be positive")
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self.directory.mkdir(parents=True, exist_ok=True)

    def path_for(self, digest: str) -> Path:
        """Where the image of ``digest`` lives (whether or not it exists yet)."""
        algorithm, _, value = digest.partition(":")
        if not value or not value.isalnum() or not algorithm.isalnum():
            raise InvalidArgument(f"image digest {digest!r}: expected ALGORITHM:HEX")
        return self.directory / f"{algorithm}-{value}.erofs"

    def get(self, digest: str) -> Path | None:
        """The cached image of ``digest``, marked as just used, or None."""
        path = self.path_for(digest)
        try:
            # The access time marks the use (eviction goes by it) and the modification time
            # stays: the image's mount key includes it (StateDir.image_key), and a key changed
            # by every lookup had the node mount the image again for the next container
            # while its mount hold kept the old one.
            modified = os.stat(path).st_mtime_ns
            os.utime(path, ns=(time.time_ns(), modified))
        except FileNotFoundError:
            return None
        return path

    @contextlib.contextmanager
    def _lock(self, digest: str) -> Iterator[None]:
        lock = self.path_for(digest).with_suffix(".lock")
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _get_or_build(self, digest: str, build: Callable[[Path], Path]) -> Path:
        cached = self.get(digest)
        if cached is not None:
            return cached
        with self._lock(digest):
            cached = self.get(digest)  # another agent may have built it meanwhile
            if cached is None:
                cached = build(self.path_for(digest))
        self.evict(keep=cached)
        return cached

    def from_dir(self, src: str | os.PathLike[str], digest: str) -> Path:
        """The image of tree ``src`` whose content digest the caller knows."""
        return self._get_or_build(digest, lambda out: build_from_dir(src, out))

    def from_layers(
        self, layers: Sequence[str | os.PathLike[str]], digest: str | None = None
    ) -> Path:
        """The image of these layers, converted once per node."""
        key = digest or layers_digest(layers)
        return self._get_or_build(
            key, lambda out: build_from_layers(layers, out, workdir=self.directory)
        )

    def entries(self) -> list[Path]:
        """Cached images, least recently used first (by access time: see :meth:`get`)."""
        return sorted(self.directory.glob("*.erofs"), key=lambda p: p.stat().st_atime_ns)

    def size(self) -> int:
        """Bytes held by cached images."""
        return sum(p.stat().st_size for p in self.directory.glob("*.erofs"))

    def evict(self, keep: Path | None = None) -> list[Path]:
        """Remove least recently used images until the cache fits ``max_bytes``.

        A removed image still mounted stays readable by its containers (the open loop device
        holds the file) and disappears when they end.
        """
        removed: list[Path] = []
        total = self.size()
        for path in self.entries():
            if total <= self.max_bytes:
                break
            if keep is not None and path == keep:
                continue
            size = path.stat().st_size
            path.unlink(missing_ok=True)
            # its lock and what the backends keep beside it (the image's config) go with it
            for companion in self.directory.glob(f"{path.stem}.*"):
                companion.unlink(missing_ok=True)
            total -= size
            removed.append(path)
        return removed
