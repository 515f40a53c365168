"""EROFS images: built with ``mkfs.erofs`` (Debian erofs-utils), cached per content digest.

``build_from_dir(src, out)`` converts a tree; ``build_from_layers(tars, out)`` first applies
OCI layers (see :mod:`fuzzball_runtime.layers`); :class:`ImageCache` keeps one converted file
per digest on the node, evicting the least recently used beyond ``max_bytes``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from fuzzball_core.errors import FailedPrecondition, InvalidArgument

from .errors import RuntimeFailure
from .layers import apply_layer

MKFS = "mkfs.erofs"
DEFAULT_COMPRESSION = "lz4"


class ImageBuildError(RuntimeFailure):
    """mkfs.erofs failed; the message carries its stderr."""


def mkfs_command(src: Path, out: Path, compression: str | None) -> list[str]:
    """The mkfs.erofs invocation used for every conversion."""
    command = [MKFS, "--quiet"]
    if compression:
        command.append(f"-z{compression}")
    return [*command, str(out), str(src)]


def build_from_dir(
    src: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    compression: str | None = DEFAULT_COMPRESSION,
) -> Path:
    """Convert the tree ``src`` into the EROFS file ``out`` (written atomically)."""
    source, target = Path(src), Path(out)
    if not source.is_dir():
        raise InvalidArgument(f"image source {source}: not a directory")
    if shutil.which(MKFS) is None:
        raise FailedPrecondition(f"{MKFS} not found: install Debian's erofs-utils")
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    result = subprocess.run(
        mkfs_command(source, partial, compression), capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        partial.unlink(missing_ok=True)
        raise ImageBuildError(
            f"{MKFS} {source} -> {target} failed ({result.returncode}): "
            f"{result.stderr.strip() or result.stdout.strip()}"
        )
    os.replace(partial, target)
    return target


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
        root = Path(staging) / "rootfs"
        root.mkdir(mode=0o755)
        for layer in layers:
            apply_layer(layer, root)
        return build_from_dir(root, target, compression=compression)


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
            os.utime(path)
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
        """Cached images, least recently used first."""
        return sorted(self.directory.glob("*.erofs"), key=lambda p: p.stat().st_mtime)

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
