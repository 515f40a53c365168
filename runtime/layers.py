"""Apply OCI layer tarballs, in order, onto a directory tree.

Whiteouts (``.wh.NAME``) remove what lower layers put at NAME; an opaque marker
(``.wh..wh..opq``) hides everything lower layers put in its directory. Ownership (numeric),
modes, xattrs (PAX ``SCHILY.xattr.*``), symlinks, hardlinks, device nodes and FIFOs are kept.
Paths are resolved inside the tree: no entry, symlink or hardlink can reach outside it.
"""

from __future__ import annotations

import os
import shutil
import stat
import tarfile
import zlib
from pathlib import Path
from typing import IO

from fuzzball_core.errors import InvalidArgument

WHITEOUT_PREFIX = ".wh."
OPAQUE_MARKER = ".wh..wh..opq"
XATTR_PREFIX = "SCHILY.xattr."
MAX_SYMLINK_HOPS = 40
_COPY_CHUNK = 1 << 20
#: bytes of each copied chunk that :class:`ContentSample` compresses
SAMPLE_BYTES = 16 << 10
#: files smaller than this are not judged one by one (trying lz4 on them costs little)
MIN_HINTED_BYTES = 256 << 10


class ContentSample:
    """How well the files written so far compress, from a slice of every chunk copied, in
    all and file by file.

    zlib at level 1 on the first :data:`SAMPLE_BYTES` of each MiB stands in for the image's
    lz4: a slice that zlib cannot shrink, lz4 cannot either. Sampling costs about 2 % of
    compressing everything.
    """

    def __init__(self) -> None:
        self.sampled = 0
        self.compressed = 0
        #: files of at least :data:`MIN_HINTED_BYTES` and the fraction their sample saved
        self.files: dict[Path, tuple[int, float]] = {}

    def file(self, path: Path, source: IO[bytes], target: IO[bytes]) -> None:
        """Copy one file's content from ``source`` to ``target``, sampling it."""
        size = sampled = compressed = 0
        while chunk := source.read(_COPY_CHUNK):
            target.write(chunk)
            part = chunk[:SAMPLE_BYTES]
            size += len(chunk)
            sampled += len(part)
            compressed += min(len(part), len(zlib.compress(part, 1)))
        self.sampled += sampled
        self.compressed += compressed
        if size >= MIN_HINTED_BYTES:
            self.files[path] = (size, 1.0 - compressed / sampled)

    def saving(self) -> float:
        """The fraction of the sampled bytes compression saved (0.0 with nothing sampled)."""
        return 1.0 - self.compressed / self.sampled if self.sampled else 0.0

    def incompressible(self, below: float) -> list[Path]:
        """The files whose sample saved less than ``below``, largest first."""
        found = [(size, path) for path, (size, saved) in self.files.items() if saved < below]
        return [path for _, path in sorted(found, key=lambda item: -item[0])]


def _parts(path: str) -> list[str]:
    return [p for p in path.split("/") if p not in ("", ".")]


def resolve_in_root(root: Path, path: str) -> Path:
    """``path`` inside ``root`` with every component but the last resolved as if ``root``
    were ``/`` (symlinks followed inside it, ``..`` stopping at it)."""
    pending = _parts(path)
    resolved: list[str] = []
    hops = 0
    while pending:
        part = pending.pop(0)
        if part == "..":
            if resolved:
                resolved.pop()
            continue
        candidate = root.joinpath(*resolved, part)
        if pending and candidate.is_symlink():
            hops += 1
            if hops > MAX_SYMLINK_HOPS:
                raise InvalidArgument(f"layer path {path!r}: too many levels of symbolic links")
            target = os.readlink(candidate)
            if target.startswith("/"):
                resolved = []
            pending = _parts(target) + pending
            continue
        resolved.append(part)
    return root.joinpath(*resolved)


def follow_in_root(root: Path, path: str) -> Path:
    """``path`` inside ``root`` with every symlink followed, the last component's too, as if
    ``root`` were ``/`` (what opening ``path`` in the root would reach; it may not exist)."""
    current = path
    for _ in range(MAX_SYMLINK_HOPS):
        resolved = resolve_in_root(root, current)
        if not resolved.is_symlink():
            return resolved
        target = os.readlink(resolved)
        # a relative target is relative to the link's directory, inside the root
        parent = resolved.parent.relative_to(root)
        current = target if target.startswith("/") else f"/{parent}/{target}"
    raise InvalidArgument(f"{path} in the image: too many levels of symbolic links")


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()


def _prune(path: Path, created: set[Path]) -> None:
    """Remove what lower layers put at ``path``, keeping what this layer ``created`` there
    (a whiteout hides lower layers only, wherever it comes in the layer's stream)."""
    if path not in created:
        _remove(path)
    elif path.is_dir() and not path.is_symlink():
        for child in list(path.iterdir()):
            _prune(child, created)


def _whiteout(member: tarfile.TarInfo, root: Path, created: set[Path]) -> bool:
    """Apply ``member`` if it is a whiteout or an opaque marker; False when it is neither."""
    parent, _, base = member.name.rstrip("/").rpartition("/")
    if base == OPAQUE_MARKER:
        directory = resolve_in_root(root, parent)
        if directory.is_dir() and not directory.is_symlink():
            for child in list(directory.iterdir()):
                _prune(child, created)
        return True
    if base.startswith(WHITEOUT_PREFIX):
        _prune(resolve_in_root(root, f"{parent}/{base[len(WHITEOUT_PREFIX) :]}"), created)
        return True
    return False


def _record(dest: Path, root: Path, created: set[Path]) -> None:
    """Note ``dest`` and the directories above it as this layer's."""
    while dest != root and dest not in created:
        created.add(dest)
        dest = dest.parent


def _set_attributes(path: Path, member: tarfile.TarInfo) -> None:
    os.chown(path, member.uid, member.gid, follow_symlinks=False)
    if not member.issym():
        # After chown, which clears set-id bits.
        os.chmod(path, member.mode & 0o7777)
    for key, value in member.pax_headers.items():
        if key.startswith(XATTR_PREFIX):
            os.setxattr(
                path,
                key[len(XATTR_PREFIX) :],
                value.encode("utf-8", "surrogateescape"),
                follow_symlinks=False,
            )
    if not member.isdir():
        os.utime(path, (member.mtime, member.mtime), follow_symlinks=False)


def _extract(
    tar: tarfile.TarFile,
    member: tarfile.TarInfo,
    root: Path,
    layer: str,
    sample: ContentSample | None,
) -> Path | None:
    """Write ``member`` into the tree; returns where (None for the root entry)."""
    if not _parts(member.name):
        return None  # the root entry "./"
    dest = resolve_in_root(root, member.name)
    if dest == root:
        return None
    dest.parent.mkdir(parents=True, exist_ok=True)
    existing_dir = dest.is_dir() and not dest.is_symlink()
    if member.isdir():
        if os.path.lexists(dest) and not existing_dir:
            dest.unlink()
        dest.mkdir(exist_ok=True)
        _set_attributes(dest, member)
        return dest
    if existing_dir:
        shutil.rmtree(dest)
    elif os.path.lexists(dest):
        dest.unlink()
    if member.isreg():
        source = tar.extractfile(member)
        if source is None:
            raise InvalidArgument(f"layer {layer}: {member.name}: unreadable file entry")
        with source, open(dest, "xb") as target:
            if sample is None:
                shutil.copyfileobj(source, target, _COPY_CHUNK)
            else:
                sample.file(dest, source, target)
    elif member.issym():
        os.symlink(member.linkname, dest)
    elif member.islnk():
        os.link(resolve_in_root(root, member.linkname), dest, follow_symlinks=False)
        return dest  # the link shares the original's attributes
    elif member.ischr() or member.isblk():
        kind = stat.S_IFCHR if member.ischr() else stat.S_IFBLK
        os.mknod(dest, kind | 0o600, os.makedev(member.devmajor, member.devminor))
    elif member.isfifo():
        os.mkfifo(dest, 0o600)
    else:
        raise InvalidArgument(f"layer {layer}: {member.name}: unsupported entry type")
    _set_attributes(dest, member)
    return dest


def apply_layer(
    layer: str | os.PathLike[str], root: Path, *, sample: ContentSample | None = None
) -> None:
    """Apply one layer tarball (any compression tarfile reads) onto ``root``; ``sample``,
    when given, sees the content of every regular file written.

    The layer is read once, as a stream (a compressed layer is decompressed once, not once
    to list it and again to extract it): whiteouts are applied where they come, sparing
    what this layer itself has written, which is what applying them first would give.
    """
    name = os.fspath(layer)
    created: set[Path] = set()
    directories: list[tuple[Path, float]] = []
    try:
        with tarfile.open(name, "r|*") as tar:
            for member in tar:
                if _whiteout(member, root, created):
                    continue
                dest = _extract(tar, member, root, name, sample)
                if dest is None:
                    continue
                _record(dest, root, created)
                if member.isdir():
                    directories.append((dest, member.mtime))
    except tarfile.TarError as exc:
        raise InvalidArgument(f"layer {name}: not a readable tar archive: {exc}") from exc
    # Directory times last: filling a directory changes its mtime.
    for directory, mtime in reversed(directories):
        os.utime(directory, (mtime, mtime), follow_symlinks=False)
