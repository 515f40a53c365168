"""A volume directory held to its class's capacity: an ext4 filesystem image of that size,
loop-mounted on the directory.

The node's own filesystem here has no project quotas (ext4 without ``prjquota``), so the
quota is a filesystem of its own: a sparse image file beside the directory
(``VOLUME.ext4``), made with ``mkfs.ext4`` on first use and mounted with
``loop,discard,nosuid,nodev``. A job writing past the capacity gets ``ENOSPC`` from the
kernel, as it would on a full disk; ``discard`` punches freed blocks out of the image, so the
node's disk holds what the volume holds, not its high-water mark. The image outlives the
mount: a restarted Substrate finds the directory still mounted, a rebooted node mounts the
image again on the next job, and :func:`release` unmounts and deletes both.

A volume that already holds files when its class gains a capacity has them copied into the
new filesystem, built as ``.VOLUME.ext4.partial`` and named ``VOLUME.ext4`` only once the copy
succeeded (a node that died mid-copy finds the partial image, deletes it and copies again,
rather than mounting a half-filled filesystem over the files); one holding more than the
capacity is refused, naming both sizes.

A capacity raised later grows the filesystem only through :func:`grow_to` (``resize2fs``,
offline: online growth needs CAP_SYS_RESOURCE), which the node calls when it knows that no run
of its uses the volume: a container has the volume bind-mounted in its own mount namespace,
so the host's ``umount`` succeeding says nothing about whether a job still writes to it, and
checking or resizing a filesystem a job still writes corrupts it. :func:`hold_within` never
grows; it logs that the growth waits. A capacity lowered later leaves the volume at its size
(ext4 is not shrunk), with a warning in the node's log.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import threading
from pathlib import Path

from fuzzball_core.errors import FailedPrecondition, Unavailable

log = logging.getLogger(__name__)

#: the image file's name beside the volume directory: ``VOLUME`` -> ``VOLUME.ext4``
IMAGE_SUFFIX = ".ext4"
#: below this size the image has no journal (ext4's smallest journal is 4 MiB)
_JOURNAL_FROM = 64 << 20
_MOUNT_OPTIONS = "loop,discard,nosuid,nodev"

_locks: dict[Path, threading.Lock] = {}
_locks_guard = threading.Lock()


def image_of(directory: Path) -> Path:
    """The filesystem image holding ``directory``'s data."""
    return directory.with_name(directory.name + IMAGE_SUFFIX)


def hold_within(directory: Path, capacity: int) -> None:
    """Make ``directory`` (which exists) a filesystem of ``capacity`` bytes, mounted, keeping
    what it holds; nothing to do when it already is. FailedPrecondition when its files do not
    fit, Unavailable when the node cannot make or mount the image (naming the tool's error)."""
    with _lock_for(directory):
        image = image_of(directory)
        mounting = not os.path.ismount(directory)
        if mounting:
            fresh = not image.exists()
            if fresh:
                _make_filled_image(directory, image, capacity)
            _mount(image, directory)
            if fresh:
                _drop_lost_and_found(directory)
        size = image.stat().st_size
        if capacity > size:
            log.warning(
                "volume %s: its class's capacity grew to %d bytes from its filesystem's %d; it "
                "grows the next time a job takes it while no other job on this node uses it",
                directory.name,
                capacity,
                size,
            )
        elif capacity < size and mounting:
            log.warning(
                "volume %s: its class's capacity is now %d bytes, below its filesystem's %d; "
                "ext4 is not shrunk, so it keeps its size",
                directory.name,
                capacity,
                size,
            )


def grow_to(directory: Path, capacity: int) -> None:
    """Grow ``directory``'s filesystem to ``capacity`` bytes when it is smaller (nothing to do
    for a volume without an image yet, or one already as large). Only for a volume no job uses:
    the caller knows (the node counts the runs using each volume); a mounted one is unmounted,
    grown and mounted again. A mount some process on the node itself still holds keeps its size,
    with a warning. Unavailable naming the tool when the check or the resize fails."""
    with _lock_for(directory):
        image = image_of(directory)
        # the filesystem's size, not the image's: a grow cut short (the node died, resize2fs
        # failed) leaves the image at the capacity and its filesystem smaller
        if not image.exists() or capacity <= _filesystem_size(image):
            return
        if not os.path.ismount(directory):
            _grow(image, capacity)
            return
        done = subprocess.run(
            ["umount", str(directory)], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            log.warning(
                "volume %s: not grown to %d bytes, a process on this node holds it (%s); it "
                "grows the next time a job takes it while no other job on this node uses it",
                directory.name,
                capacity,
                done.stderr.strip(),
            )
            return
        try:
            _grow(image, capacity)
        finally:
            _mount(image, directory)


def release(directory: Path) -> None:
    """Unmount ``directory`` if its image is mounted there and delete the image (the
    directory itself is the caller's to delete)."""
    with _lock_for(directory):
        if os.path.ismount(directory):
            # lazy: a job still holding a file open keeps the filesystem until it lets go
            _run(["umount", "--lazy", str(directory)], directory)
        image_of(directory).unlink(missing_ok=True)


def _make_filled_image(directory: Path, image: Path, capacity: int) -> None:
    """Make ``image`` holding a copy of what ``directory`` holds, then empty ``directory``.
    The image is built under a partial name and renamed into place only once complete: an
    ``image`` that exists is always a whole copy, and a partial one left by a node that died
    while making it is made again (the files are still in ``directory``)."""
    partial = image.with_name(f".{image.name}.partial")
    partial.unlink(missing_ok=True)
    try:
        _make_image(partial, capacity)
        if any(directory.iterdir()):
            _adopt(directory, partial, capacity)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    partial.replace(image)
    _empty(directory)


def _make_image(image: Path, capacity: int) -> None:
    with image.open("wb") as out:
        out.truncate(capacity)  # sparse: the node's disk holds only what is written
    features = [] if capacity >= _JOURNAL_FROM else ["-O", "^has_journal"]
    _run(
        ["mkfs.ext4", "-q", "-F", "-m", "0", *features, "-E", "nodiscard", str(image)],
        image,
    )


def _adopt(directory: Path, image: Path, capacity: int) -> None:
    """Copy ``directory``'s files into the fresh ``image`` (FailedPrecondition when they do
    not fit)."""
    staging = directory.with_name(f".{directory.name}.adopting")
    if os.path.ismount(staging):  # left mounted by a node that died while adopting
        _run(["umount", "--lazy", str(staging)], directory)
    staging.mkdir(mode=0o700, exist_ok=True)
    _run(["mount", "-o", _MOUNT_OPTIONS, str(image), str(staging)], directory)
    try:
        _drop_lost_and_found(staging)
        copied = subprocess.run(
            ["cp", "-a", "--", f"{directory}/.", str(staging)],
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        _run(["umount", str(staging)], directory)
        staging.rmdir()
    if copied.returncode != 0:
        raise FailedPrecondition(
            f"volume {directory.name}: holds more than its storage class's capacity of "
            f"{capacity} bytes; the quota cannot be applied"
        )


def _empty(directory: Path) -> None:
    for entry in directory.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def _drop_lost_and_found(root: Path) -> None:
    # mkfs's lost+found is not the user's: a volume starts as empty as its directory was
    with contextlib.suppress(OSError):
        (root / "lost+found").rmdir()


def _mount(image: Path, directory: Path) -> None:
    stat = directory.stat()
    _run(["mount", "-o", _MOUNT_OPTIONS, str(image), str(directory)], directory)
    # the filesystem's root takes the place of the directory: same owner and mode
    os.chown(directory, stat.st_uid, stat.st_gid)
    directory.chmod(stat.st_mode & 0o7777)


def _filesystem_size(image: Path) -> int:
    """The size of the ext4 filesystem in ``image``, in bytes, from its superblock."""
    try:
        done = subprocess.run(
            ["dumpe2fs", "-h", str(image)], capture_output=True, text=True, check=False
        )
    except FileNotFoundError:
        raise Unavailable(
            f"volume {image.name}: dumpe2fs is not installed on this node (needed for its "
            "storage class's capacity)"
        ) from None
    fields = dict(line.split(":", 1) for line in done.stdout.splitlines() if line.count(":") >= 1)
    try:
        return int(fields["Block count"]) * int(fields["Block size"])
    except (KeyError, ValueError):
        reason = done.stderr.strip().splitlines()
        raise Unavailable(
            f"volume {image.name}: dumpe2fs failed: {reason[-1] if reason else done.returncode}"
        ) from None


def _grow(image: Path, capacity: int) -> None:
    """Grow the unmounted ``image`` to ``capacity`` (resize2fs wants a fresh check first).
    Offline, because growing a mounted ext4 needs CAP_SYS_RESOURCE, which a node may lack."""
    with image.open("r+b") as out:
        out.truncate(capacity)
    # e2fsck exits 1 when it fixed something (here: a device larger than its filesystem)
    _run(["e2fsck", "-f", "-p", str(image)], image, succeeded=(0, 1))
    _run(["resize2fs", str(image)], image)


def _run(command: list[str], about: Path, succeeded: tuple[int, ...] = (0,)) -> None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise Unavailable(
            f"volume {about.name}: {command[0]} is not installed on this node (needed for "
            "its storage class's capacity)"
        ) from None
    if done.returncode not in succeeded:
        reason = (done.stderr or done.stdout).strip().splitlines()
        raise Unavailable(
            f"volume {about.name}: {command[0]} failed: {reason[-1] if reason else done.returncode}"
        )


def _lock_for(directory: Path) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(directory, threading.Lock())
