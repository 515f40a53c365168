"""Fixtures for the node runtime tests: a busybox root file system converted to EROFS at
test time, a state directory, and a check after every test that nothing was left behind."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fuzzball_runtime import cgroups, sweep
from fuzzball_runtime.state import StateDir

BUSYBOX = Path("/bin/busybox")


def _require_root_kernel() -> None:
    if os.geteuid() != 0:
        pytest.skip("the node runtime tests need root (namespaces, loop devices, cgroups)")
    if not BUSYBOX.exists() or shutil.which("mkfs.erofs") is None:
        pytest.skip("needs Debian's busybox-static and erofs-utils")
    if "erofs" not in Path("/proc/filesystems").read_text():
        pytest.skip("the kernel has no EROFS support")


@pytest.fixture(scope="session")
def rootfs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A minimal root file system: Debian's static busybox and its applet symlinks."""
    _require_root_kernel()
    root = tmp_path_factory.mktemp("busybox") / "rootfs"
    for directory in ("bin", "sbin", "usr/bin", "usr/sbin", "etc", "proc", "dev", "tmp"):
        (root / directory).mkdir(parents=True)
    (root / "tmp").chmod(0o1777)
    shutil.copy2(BUSYBOX, root / "bin" / "busybox")
    subprocess.run(
        ["chroot", str(root), "/bin/busybox", "--install", "-s"], check=True, capture_output=True
    )
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    return root


@pytest.fixture(scope="session")
def image(rootfs: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The busybox root file system converted by ``fuzzball-runtime build-image``."""
    out = tmp_path_factory.mktemp("images") / "busybox.erofs"
    subprocess.run(
        [sys.executable, "-m", "fuzzball_runtime.cli", "build-image", str(rootfs), str(out)],
        check=True,
        capture_output=True,
    )
    return out


@pytest.fixture(scope="session")
def session_state_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The runtime's state directory for the whole session (swept and removed at the end)."""
    _require_root_kernel()
    state_dir = tmp_path_factory.mktemp("state")
    yield state_dir
    sweep(state_dir)


def leftovers(state_dir: Path, image: Path | None = None) -> list[str]:
    """Mounts, loop devices and cgroups of ``state_dir`` still present on the host."""
    found: list[str] = []
    mountinfo = Path("/proc/self/mountinfo").read_text()
    found += [line for line in mountinfo.splitlines() if str(state_dir) in line]
    if image is not None:
        for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
            try:
                if backing.read_text().strip() == str(image):
                    found.append(f"{backing.parent.parent.name} backed by {image}")
            except OSError:
                pass
    group = StateDir(state_dir).cgroup_group
    found += [str(d) for d in cgroups.job_dirs(cgroups.detect_layout(), group)]
    return found


def wait_clean(state_dir: Path, image: Path | None = None, timeout: float = 3.0) -> list[str]:
    """Leftovers once the kernel has finished tearing down (loop autoclear is asynchronous)."""
    deadline = time.monotonic() + timeout
    while (found := leftovers(state_dir, image)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return found


@pytest.fixture
def state_dir(session_state_dir: Path, image: Path) -> Iterator[Path]:
    """The state directory, checked after the test: nothing mounted, attached or grouped."""
    yield session_state_dir
    assert wait_clean(session_state_dir, image) == []


@pytest.fixture
def find_leftovers() -> object:
    """``find_leftovers(state_dir, image)`` -> what is still mounted, attached or grouped."""
    return wait_clean


def run_in(image: Path, state_dir: Path, script: str, **fields: object) -> tuple[object, str]:
    """Run ``sh -c script`` to completion; returns (ExitStatus, stdout)."""
    from fuzzball_runtime import PIPE, Container, ContainerSpec

    spec = ContainerSpec(
        image=image, command=["sh", "-c", script], stdout=PIPE, state_dir=state_dir
    )
    for name, value in fields.items():
        setattr(spec, name, value)
    with Container(spec).start() as handle:
        assert handle.stdout is not None
        output = handle.stdout.read().decode()
        status = handle.wait(timeout=30)
    return status, output


@pytest.fixture
def run(image: Path, state_dir: Path) -> object:
    """``run(script, **spec_fields)`` -> (ExitStatus, stdout) of ``sh -c script``."""
    return lambda script, **fields: run_in(image, state_dir, script, **fields)


@pytest.fixture
def run_image(state_dir: Path) -> object:
    """``run_image(image, script, **spec_fields)`` -> as ``run``, in another image."""
    return lambda image, script, **fields: run_in(image, state_dir, script, **fields)
