"""/etc/hosts and /etc/resolv.conf: written over the image's /etc without changing the rest."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = pytest.mark.root

#: build an image from a copy of the busybox rootfs changed by the callable
ImageOf = Callable[[Callable[[Path], None]], Path]


@pytest.fixture
def image_of(rootfs: Path, tmp_path: Path) -> ImageOf:
    def build(change: Callable[[Path], None]) -> Path:
        root = tmp_path / "rootfs"
        shutil.copytree(rootfs, root, symlinks=True)
        change(root)
        out = tmp_path / "changed.erofs"
        subprocess.run(
            [sys.executable, "-m", "fuzzball_runtime.cli", "build-image", str(root), str(out)],
            check=True,
            capture_output=True,
        )
        return out

    return build


def test_etc_keeps_the_images_files_mode_and_owner_beside_the_written_files(
    image_of: ImageOf, run_image
) -> None:
    def change(root: Path) -> None:
        (root / "etc" / "motd").write_text("from the image\n")
        (root / "etc" / "hosts").write_text("10.0.0.1\timage-host\n")
        (root / "etc").chmod(0o750)
        shutil.chown(root / "etc", 0, 42)

    image = image_of(change)
    status, output = run_image(
        image,
        "stat -c '%a %u %g' /etc; ls /etc; cat /etc/motd /etc/hosts /etc/resolv.conf",
        hostname="box",
        resolv_conf="nameserver 10.9.9.9\n",
    )
    assert status.exit_code == 0, output
    lines = output.splitlines()
    assert lines[0] == "750 0 42"
    assert {"hosts", "motd", "passwd", "resolv.conf"} <= set(lines[1:5])
    assert "from the image" in output
    assert "127.0.1.1\tbox" in output
    assert "image-host" not in output
    assert "nameserver 10.9.9.9" in output


def test_etc_written_through_the_images_symlink_when_etc_is_one(
    image_of: ImageOf, run_image
) -> None:
    def change(root: Path) -> None:
        (root / "usr" / "etc").mkdir()
        shutil.move(root / "etc" / "passwd", root / "usr" / "etc" / "passwd")
        (root / "etc").rmdir()
        (root / "etc").symlink_to("usr/etc")

    image = image_of(change)
    status, output = run_image(image, "readlink /etc; cat /usr/etc/hosts", hostname="linked")
    assert status.exit_code == 0, output
    assert output.startswith("usr/etc\n")
    assert "127.0.1.1\tlinked" in output


def test_etc_files_are_written_when_the_writable_layer_is_a_scratch_directory(
    run, tmp_path: Path
) -> None:
    status, output = run(
        "cat /etc/hosts /etc/resolv.conf; ls /etc",
        hostname="scratchy",
        resolv_conf="nameserver 10.8.8.8\n",
        scratch_dir=str(tmp_path / "scratch"),
    )
    assert status.exit_code == 0, output
    assert "127.0.1.1\tscratchy" in output
    assert "nameserver 10.8.8.8" in output
    assert "passwd" in output.split()
