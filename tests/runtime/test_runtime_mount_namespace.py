"""The container's mount namespace is a copy of the empty template, not of the host's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fuzzball_runtime import Bind
from fuzzball_runtime.errors import RuntimeFailure
from fuzzball_runtime.native import check, lib, new_error

pytestmark = pytest.mark.root

# Run in a single-threaded interpreter (setns into a mount namespace refuses a process whose
# threads share its file system context): enter the namespace open on the descriptor given as
# the argument and describe its root.
_DESCRIBE_TEMPLATE = textwrap.dedent(
    """
    import ctypes, errno, json, os, sys
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(int(sys.argv[1]), 0x00020000) != 0:  # CLONE_NEWNS
        raise OSError(ctypes.get_errno(), "setns")
    try:
        open("/probe", "w")
        write = "allowed"
    except OSError as exc:
        write = errno.errorcode[exc.errno]
    print(json.dumps({"entries": os.listdir("/"), "write": write}))
    """
)


def _mount_points(mountinfo: str) -> list[str]:
    return sorted(line.split()[4] for line in mountinfo.splitlines())


def test_the_container_sees_only_its_own_mounts(run, tmp_path) -> None:
    status, output = run(
        "cat /proc/self/mountinfo", binds=[Bind(str(tmp_path), "/data", readonly=True)]
    )
    assert status.exit_code == 0
    # Nothing of the host's tree (its root, the state directory's mounts) nor the template's
    # tmpfs under the overlay: only what the runtime mounted for the container.
    assert _mount_points(output) == ["/", "/data", "/dev", "/dev/pts", "/proc", "/sys", "/tmp"]
    assert "fbrt-template" not in output


def _mount_at(mountinfo: str, point: str) -> dict[str, str]:
    """The root, options and file system type of the mount at ``point`` (proc(5))."""
    for line in mountinfo.splitlines():
        fields = line.split()
        if fields[4] == point:
            return {
                "root": fields[3],
                "options": fields[5],
                "fstype": fields[fields.index("-") + 1],
            }
    raise AssertionError(f"nothing mounted at {point}: {mountinfo}")


def test_tmp_is_a_sticky_directory_of_the_upper_layers_tmpfs(run) -> None:
    status, output = run(
        "stat -c '%a %U' /tmp && touch /tmp/probe && ls /tmp && echo --- "
        "&& cat /proc/self/mountinfo"
    )
    assert status.exit_code == 0
    listing, mountinfo = output.split("---\n")
    # Writable by everyone, sticky, empty but for what the job writes.
    assert listing == "1777 root\nprobe\n"
    tmp = _mount_at(mountinfo, "/tmp")
    # A bind of the upper layer's tmpfs' own directory for it (its root is that directory,
    # nothing above it in reach), not a superblock of its own, with a /tmp's flags.
    assert tmp["fstype"] == "tmpfs"
    assert tmp["root"] == "/tmp"
    assert {"nosuid", "nodev"} <= set(tmp["options"].split(","))


@pytest.mark.parametrize("readonly", [False, True], ids=["read-write", "read-only"])
def test_a_bind_is_nosuid_and_nodev(run, tmp_path, readonly) -> None:
    status, output = run(
        "cat /proc/self/mountinfo", binds=[Bind(str(tmp_path), "/data", readonly=readonly)]
    )
    assert status.exit_code == 0
    options = set(_mount_at(output, "/data")["options"].split(","))
    assert {"nosuid", "nodev"} <= options
    assert ("ro" in options) == readonly


def test_a_mount_below_a_bind_source_is_nosuid_and_nodev_too(run, tmp_path) -> None:
    below = tmp_path / "below"
    below.mkdir()
    subprocess.run(["mount", "--bind", str(below), str(below)], check=True)
    try:
        status, output = run("cat /proc/self/mountinfo", binds=[Bind(str(tmp_path), "/data")])
    finally:
        subprocess.run(["umount", str(below)], check=True)
    assert status.exit_code == 0
    assert {"nosuid", "nodev"} <= set(_mount_at(output, "/data/below")["options"].split(","))


def test_tmp_is_a_tmpfs_of_its_own_with_a_scratch_upper_layer(run, tmp_path) -> None:
    status, output = run("cat /proc/self/mountinfo", scratch_dir=str(tmp_path))
    assert status.exit_code == 0
    tmp = _mount_at(output, "/tmp")
    assert (tmp["fstype"], tmp["root"]) == ("tmpfs", "/")


def test_the_template_is_an_empty_read_only_root_made_without_touching_the_host(
    tmp_path,
) -> None:
    err = new_error()
    fd = check(lib.fbrt_mnt_template_open(os.fsencode(tmp_path), err), err)
    try:
        done = subprocess.run(
            [sys.executable, "-c", _DESCRIBE_TEMPLATE, str(fd)],
            pass_fds=(fd,),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=True,
        )
    finally:
        os.close(fd)
    assert json.loads(done.stdout) == {"entries": [], "write": "EROFS"}
    # Its tmpfs was mounted on tmp_path in the template's namespace only.
    assert not os.path.ismount(tmp_path)
    assert str(tmp_path) not in Path("/proc/self/mountinfo").read_text()


def test_a_template_on_a_missing_directory_fails_naming_it(tmp_path) -> None:
    err = new_error()
    missing = tmp_path / "missing"
    with pytest.raises(RuntimeFailure, match=f"template's tmpfs on {missing}"):
        check(lib.fbrt_mnt_template_open(os.fsencode(missing), err), err)


def test_mounts_inside_a_bind_of_a_shared_mount_stay_in_the_container(run, tmp_path) -> None:
    shared = tmp_path / "shared"
    (shared / "sub").mkdir(parents=True)
    subprocess.run(["mount", "--bind", str(shared), str(shared)], check=True)
    try:
        subprocess.run(["mount", "--make-shared", str(shared)], check=True)
        status, output = run(
            "mount -t tmpfs inside /data/sub && grep -c ' /data/sub ' /proc/self/mountinfo",
            binds=[Bind(str(shared), "/data")],
            capabilities=None,  # every one: only a container that may mount can leak one
        )
        assert (status.exit_code, output) == (0, "1\n")
        assert f"{shared}/sub" not in Path("/proc/self/mountinfo").read_text()
    finally:
        subprocess.run(["umount", "--recursive", str(shared)], check=True)
