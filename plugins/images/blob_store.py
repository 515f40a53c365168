"""The node's content-addressed blob directory, with one lock file per digest.

Pulls of the same content coalesce: whoever takes a digest's lock first downloads (or
converts); everyone else waits on the lock and then finds the result in place. ``flock`` locks
belong to open file descriptions, so they serialise threads of one process as well as
separate processes.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path


def digest_file_name(digest: str) -> str:
    """A file-system-safe name for ``digest`` (``sha256:ab..`` -> ``sha256-ab..``)."""
    algorithm, _, hex_part = digest.partition(":")
    if not algorithm.isalnum() or not hex_part.isalnum():
        raise ValueError(f"not a digest: {digest!r}")
    return f"{algorithm}-{hex_part}"


@contextmanager
def digest_lock(lock_dir: Path, digest: str) -> Iterator[None]:
    """Hold the exclusive lock for ``digest`` (blocking until it is free)."""
    lock_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_dir / (digest_file_name(digest) + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the description releases the lock


class BlobStore:
    """Verified blobs under ``root/blobs``; partial downloads sit beside them as ``.partial``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.blob_dir = root / "blobs"
        self.lock_dir = root / "locks"
        self.blob_dir.mkdir(parents=True, exist_ok=True)

    def path(self, digest: str) -> Path:
        """Where the blob named ``digest`` lives once verified."""
        return self.blob_dir / digest_file_name(digest)

    def has(self, digest: str, size: int) -> bool:
        """True when the verified blob is present with the expected size."""
        try:
            return self.path(digest).stat().st_size == size
        except FileNotFoundError:
            return False

    def lock(self, digest: str) -> AbstractContextManager[None]:
        """The lock that serialises downloading (or building from) ``digest``."""
        return digest_lock(self.lock_dir, digest)
