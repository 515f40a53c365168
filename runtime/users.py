"""Who a container's command runs as: an image's ``User`` resolved in the image's own
/etc/passwd and /etc/group, the way runc (and so Docker and Podman) resolves it.

``NAME`` or ``UID`` takes the uid, primary gid and home of the passwd entry (a ``UID`` with
no entry runs as that uid with gid 0), plus, as supplementary groups, every group in
/etc/group that lists the user's name. ``USER:GROUP`` (each a name or a number) takes the
group from /etc/group instead and no supplementary groups. A name that is not in the files
is an error; a missing file counts as empty. The files are read inside the mounted image
(symlinks resolved within it), never the host's.

HOME, when a container's environment sets none, is the home of the passwd entry of the uid it
runs as (root's included), ``/`` when the image has no entry for it: what runc sets
(:func:`home_in_image`).
"""

from __future__ import annotations

import functools
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

from fuzzball_core.errors import InvalidArgument

from .layers import follow_in_root
from .spec import DEFAULT_STATE_DIR
from .state import StateDir

#: the most bytes of /etc/passwd or /etc/group read
MAX_FILE_BYTES = 4 << 20
_MAX_ID = 2**32 - 2


@dataclass(frozen=True)
class Identity:
    """The ids a command runs with, and the home directory its passwd entry names."""

    uid: int
    gid: int
    groups: tuple[int, ...] = ()
    home: str = "/"


def read_in_root(root: Path, path: str) -> str | None:
    """The text of ``path`` inside ``root``, every symlink resolved within ``root``; None
    when there is no such file."""
    try:
        with follow_in_root(root, path).open("rb") as f:
            return f.read(MAX_FILE_BYTES).decode("utf-8", "replace")
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None


def _numeric(text: str) -> int | None:
    """The id ``text`` of the image's User names, None for a name."""
    if not text.isdigit():
        return None
    value = int(text)
    if value > _MAX_ID:
        raise InvalidArgument(f"image user: id {text} is out of range")
    return value


def _file_id(text: str) -> int | None:
    """An id field of a passwd or group line; None when it is not a usable id (such a line
    matches nothing rather than failing every lookup)."""
    text = text.strip()
    return int(text) if text.isdigit() and int(text) <= _MAX_ID else None


def _entries(text: str | None, fields: int) -> list[list[str]]:
    """The colon-separated lines of a passwd or group file, padded to ``fields``."""
    rows = []
    for line in (text or "").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split(":")
        rows.append(parts + [""] * (fields - len(parts)))
    return rows


def resolve_user(root: Path, user: str) -> Identity:
    """Resolve ``user`` (``NAME``, ``UID``, ``NAME:GROUP``, ``UID:GID``; empty is root)
    against the passwd and group files of the image mounted at ``root``.

    Raises ``InvalidArgument`` naming the user or group that the image does not know.
    """
    if not user:
        return Identity(0, 0, (), passwd_home(root, 0))
    user_part, _, group_part = user.partition(":")
    if not user_part:
        raise InvalidArgument(f"image user {user!r}: no user before the ':'")
    wanted_uid = _numeric(user_part)
    identity = Identity(uid=wanted_uid or 0, gid=0)
    name = ""
    for row in _entries(read_in_root(root, "/etc/passwd"), 7):
        entry_uid = _file_id(row[2])
        if (row[0] == user_part) if wanted_uid is None else (entry_uid == wanted_uid):
            name, entry_gid = row[0], _file_id(row[3])
            if entry_uid is None or entry_gid is None:
                # never root by accident: an entry without usable ids is refused
                raise InvalidArgument(
                    f"image user {user_part!r}: its /etc/passwd entry has no valid uid and gid"
                )
            identity = Identity(entry_uid, entry_gid, (), row[5] or "/")
            break
    else:
        if wanted_uid is None:
            raise InvalidArgument(
                f"image user {user_part!r}: no such user in the image's /etc/passwd"
            )
    if not group_part and not name:
        return identity
    groups = _entries(read_in_root(root, "/etc/group"), 4)
    if group_part:
        wanted_gid = _numeric(group_part)
        for row in groups:
            # a number names a gid, anything else a group name (as runc reads it)
            gid = _file_id(row[2])
            if (row[0] == group_part) if wanted_gid is None else (gid == wanted_gid):
                if gid is None:
                    raise InvalidArgument(
                        f"image group {group_part!r}: its /etc/group entry has no valid gid"
                    )
                return Identity(identity.uid, gid, (), identity.home)
        if wanted_gid is None:
            raise InvalidArgument(
                f"image group {group_part!r}: no such group in the image's /etc/group"
            )
        return Identity(identity.uid, wanted_gid, (), identity.home)
    members = tuple(
        gid
        for row in groups
        if name in (member.strip() for member in row[3].split(","))
        and (gid := _file_id(row[2])) is not None
    )
    return Identity(identity.uid, identity.gid, members, identity.home)


def passwd_home(root: Path, uid: int) -> str:
    """The home directory of the first entry for ``uid`` in the /etc/passwd of the image at
    ``root``; ``/`` when it has none (or no readable file, or the entry names no home), as
    runc falls back (its default user's home)."""
    try:
        text = read_in_root(root, "/etc/passwd")
    except (InvalidArgument, OSError):  # runc ignores a passwd file it cannot open
        return "/"
    for row in _entries(text, 7):
        if _file_id(row[2]) == uid:
            return row[5] or "/"
    return "/"


@functools.lru_cache(maxsize=256)
def home_in_image(mount_point: str, uid: int) -> str:
    """:func:`passwd_home` in the image mounted at ``mount_point``, remembered: a mount point's
    name is its image file's key (device, inode, size, mtime and path), so the same name
    always holds the same files, and every run of an array asks the same question."""
    return passwd_home(Path(mount_point), uid)


def image_identity(
    image: str | os.PathLike[str], user: str, state_dir: str | os.PathLike[str] = DEFAULT_STATE_DIR
) -> Identity:
    """Resolve ``user`` in the EROFS image file ``image``: its shared mount under
    ``state_dir`` is used (taken for the lookup, so a mount containers hold is reused and a
    fresh one goes again afterwards)."""
    state = StateDir(state_dir).ensure()
    holder = f"user-lookup-{uuid.uuid4().hex[:12]}"
    key, root = state.acquire_image(image, holder)
    try:
        return resolve_user(root, user)
    finally:
        state.release_image(key, holder)
