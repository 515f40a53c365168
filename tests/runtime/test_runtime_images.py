"""EROFS images from directory trees and from ordered OCI layer tarballs, cached per digest."""

from __future__ import annotations

import contextlib
import io
import os
import stat
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from fuzzball_core.errors import InvalidArgument
from fuzzball_runtime.erofs import ImageCache, build_from_dir, build_from_layers
from fuzzball_runtime.state import StateDir

pytestmark = pytest.mark.root


def _entry(name: str, kind: bytes = tarfile.REGTYPE, **attrs: object) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
    info.mtime = 1_700_000_000
    for key, value in attrs.items():
        setattr(info, key, value)
    return info


def _layer(path: Path, entries: list[tuple[tarfile.TarInfo, bytes]]) -> Path:
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in entries:
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data else None)
    return path


@pytest.fixture
def three_layers(tmp_path: Path) -> list[Path]:
    """Base, a layer with a whiteout and an opaque directory, and a layer of uid 1000 files."""
    base = _layer(
        tmp_path / "base.tar",
        [
            (_entry("etc", tarfile.DIRTYPE), b""),
            (_entry("etc/keep"), b"kept\n"),
            (_entry("etc/removed"), b"to be whited out\n"),
            (_entry("opaque", tarfile.DIRTYPE), b""),
            (_entry("opaque/old"), b"hidden by the opaque marker\n"),
            (_entry("link", tarfile.SYMTYPE, linkname="etc/keep"), b""),
            (_entry("hard", tarfile.LNKTYPE, linkname="etc/keep"), b""),
            (_entry("dev", tarfile.DIRTYPE), b""),
            (_entry("dev/null", tarfile.CHRTYPE, devmajor=1, devminor=3, mode=0o666), b""),
            (
                _entry("etc/labelled", pax_headers={"SCHILY.xattr.user.fuzzball": "yes"}),
                b"x",
            ),
        ],
    )
    middle = _layer(
        tmp_path / "middle.tar",
        [
            (_entry("etc/.wh.removed"), b""),
            (_entry("opaque/.wh..wh..opq"), b""),
            (_entry("opaque/new"), b"only this is visible\n"),
        ],
    )
    top = _layer(
        tmp_path / "top.tar",
        [
            (_entry("home/user", tarfile.DIRTYPE, uid=1000, gid=1000, mode=0o750), b""),
            (_entry("home/user/notes", uid=1000, gid=1000, mode=0o600), b"mine\n"),
            (_entry("usr/bin/tool", mode=0o4755), b"#!/bin/sh\n"),
        ],
    )
    return [base, middle, top]


@pytest.fixture
def mounted(state_dir: Path) -> Iterator[object]:
    """``mounted(image)`` -> the image's shared read-only mount (released after the test)."""
    state = StateDir(state_dir).ensure()
    taken: list[str] = []

    def mount(image: Path) -> Path:
        key, path = state.acquire_image(image, "test-reader")
        taken.append(key)
        return path

    yield mount
    for key in taken:
        state.release_image(key, "test-reader")


def test_three_layers_convert_to_the_right_tree(three_layers, tmp_path, mounted) -> None:
    image = build_from_layers(three_layers, tmp_path / "layered.erofs")
    root = mounted(image)
    assert (root / "etc/keep").read_text() == "kept\n"
    assert not (root / "etc/removed").exists()
    assert sorted(os.listdir(root / "opaque")) == ["new"]
    assert os.readlink(root / "link") == "etc/keep"
    assert (root / "hard").stat().st_ino == (root / "etc/keep").stat().st_ino
    device = (root / "dev/null").lstat()
    assert stat.S_ISCHR(device.st_mode) and os.major(device.st_rdev) == 1
    assert os.minor(device.st_rdev) == 3
    home = (root / "home/user").stat()
    notes = (root / "home/user/notes").stat()
    assert (home.st_uid, home.st_gid, stat.S_IMODE(home.st_mode)) == (1000, 1000, 0o750)
    assert (notes.st_uid, notes.st_gid, stat.S_IMODE(notes.st_mode)) == (1000, 1000, 0o600)
    assert stat.S_IMODE((root / "usr/bin/tool").stat().st_mode) == 0o4755
    assert os.getxattr(root / "etc/labelled", "user.fuzzball") == b"yes"
    assert not any(name.startswith(".wh.") for _, _, files in os.walk(root) for name in files)


def test_layer_symlinks_cannot_lead_outside_the_tree(tmp_path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    layer = _layer(
        tmp_path / "evil.tar",
        [
            (_entry("escape", tarfile.SYMTYPE, linkname=str(outside)), b""),
            (_entry("escape/pwned"), b"gotcha\n"),
            (_entry("../../climb"), b"gotcha\n"),
        ],
    )
    build_from_layers([layer], tmp_path / "evil.erofs")
    assert list(outside.iterdir()) == []
    assert not (tmp_path.parent / "climb").exists()


def test_a_file_that_is_not_a_tar_is_rejected_by_name(tmp_path) -> None:
    bogus = tmp_path / "bogus.tar"
    bogus.write_bytes(b"not a tarball")
    with pytest.raises(InvalidArgument, match=r"bogus\.tar"):
        build_from_layers([bogus], tmp_path / "bogus.erofs")


def test_build_from_dir_keeps_the_tree(rootfs, tmp_path, mounted) -> None:
    image = build_from_dir(rootfs, tmp_path / "tree.erofs")
    root = mounted(image)
    assert os.readlink(root / "bin/sh") == "/bin/busybox"
    assert (root / "bin/busybox").stat().st_size == (rootfs / "bin/busybox").stat().st_size


def test_cache_converts_an_image_once_per_digest(three_layers, tmp_path) -> None:
    cache = ImageCache(tmp_path / "cache", max_bytes=1 << 30)
    first = cache.from_layers(three_layers)
    inode = first.stat().st_ino
    again = cache.from_layers(three_layers)
    assert again == first and again.stat().st_ino == inode
    assert cache.get("sha256:" + "0" * 64) is None


def test_cache_evicts_the_least_recently_used_beyond_its_bound(rootfs, tmp_path) -> None:
    cache = ImageCache(tmp_path / "cache", max_bytes=1 << 30)
    old = cache.from_dir(rootfs, "sha256:" + "a" * 64)
    os.utime(old, (1, 1))
    cache.max_bytes = old.stat().st_size + 1
    new = cache.from_dir(rootfs, "sha256:" + "b" * 64)
    assert new.exists() and not old.exists()
    assert cache.size() <= cache.max_bytes


def _descriptors_on(prefixes: tuple[str, ...]) -> list[str]:
    """What this process's open descriptors on paths under ``prefixes`` refer to.

    Only these are counted: the whole test process holds thousands of descriptors other
    tests' objects left, which the collector may close while the loop runs."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(FileNotFoundError):  # the descriptor listdir itself used
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith(prefixes):
                found.append(target)
    return sorted(found)


def test_mounting_an_image_200_times_leaves_the_agents_descriptors_as_they_were(
    image, state_dir
) -> None:
    state = StateDir(state_dir).ensure()
    # a mount opens the image, a loop device and files under the state directory
    ours = (str(image), str(state_dir), "/dev/loop")
    before = _descriptors_on(ours)
    for _ in range(200):
        key, mountpoint = state.acquire_image(image, "fd-count")
        assert os.path.ismount(mountpoint)
        state.release_image(key, "fd-count")
        assert not os.path.ismount(mountpoint)
    assert _descriptors_on(ours) == before


def test_a_cache_lookup_marks_the_use_without_changing_the_images_mount_key(
    rootfs, tmp_path
) -> None:
    cache = ImageCache(tmp_path / "cache", max_bytes=1 << 30)
    first = cache.from_dir(rootfs, "sha256:" + "a" * 64)
    second = cache.from_dir(rootfs, "sha256:" + "b" * 64)
    os.utime(first, (1, 1))
    os.utime(second, (2, 2))
    key = StateDir.image_key(first)
    assert cache.get("sha256:" + "a" * 64) == first
    assert StateDir.image_key(first) == key
    assert cache.entries() == [second, first]  # the one just used is the last to go
