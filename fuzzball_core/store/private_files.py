"""Files only the service's own user may read: the data directory, the database and its WAL,
the object cache, the deployment's logs.

A workflow's env values and files pass through all of them, so none may be readable by
another local user, from the moment it is created (a file made 0644 and tightened later can
be opened in between, and an open descriptor outlives the chmod). Directories are 0700 and
files 0600; what an older version left readable is tightened when a process starts.
"""

from __future__ import annotations

import os
import stat
from contextlib import suppress
from pathlib import Path
from typing import IO

#: permission bits of the service's directories and files
DIRECTORY_MODE = 0o700
FILE_MODE = 0o600


def make_private_dirs(path: Path) -> Path:
    """Create ``path`` and each missing parent as 0700; directories that exist are left as
    they are.

    Each is made with its mode, never under a changed umask: the umask is the process's, and
    a thread creating files meanwhile (a job's image unpacked on a node agent in the same
    process) would have made them private too, where others must read them."""
    missing: list[Path] = []
    current = path
    while not current.exists() and current != current.parent:
        missing.append(current)
        current = current.parent
    for directory in reversed(missing):
        with suppress(FileExistsError):
            directory.mkdir(mode=DIRECTORY_MODE)  # the umask can only take bits away
    return path


def private_directory(path: Path) -> Path:
    """Create ``path`` (and missing parents) as 0700, and tighten it to 0700 if it exists.

    A directory shared with others is left as it is: a sticky one (``/tmp``) or one another
    user owns; only what the service itself owns is its to close.
    """
    make_private_dirs(path)
    info = path.stat()
    ours = info.st_uid == os.geteuid() and not info.st_mode & stat.S_ISVTX
    if ours and stat.S_IMODE(info.st_mode) != DIRECTORY_MODE:
        path.chmod(DIRECTORY_MODE)
    return path


def private_file(path: Path) -> Path:
    """Create ``path`` empty as 0600 if it is missing; tighten it to 0600 if it exists."""
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)
    return path


def tighten(path: Path) -> None:
    """Make an existing file 0600; nothing when it does not exist."""
    with suppress(FileNotFoundError):
        path.chmod(FILE_MODE)


def open_private(path: Path, mode: str = "wb") -> IO[bytes]:
    """``open(path, mode)`` for binary writing or appending, creating the file as 0600."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if "a" in mode else os.O_TRUNC)
    fd = os.open(path, flags, FILE_MODE)
    os.fchmod(fd, FILE_MODE)  # an existing file keeps its mode through os.open
    return os.fdopen(fd, mode)
