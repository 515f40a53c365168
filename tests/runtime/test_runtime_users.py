"""An image's ``User`` is resolved in the image's own /etc/passwd and /etc/group, as runc
resolves it; the working directory a container asks for exists in it; HOME, unless the
environment sets it, is the passwd entry's of the uid the command runs as."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fuzzball_core.errors import InvalidArgument
from fuzzball_runtime.users import Identity, image_identity, passwd_home, resolve_user

PASSWD = """root:x:0:0:root:/root:/bin/sh
# a comment line
app:x:1000:1000:the app:/home/app:/bin/sh
tool:x:1001:1002::/opt/tool:/bin/sh
"""
GROUP = """root:x:0:
app:x:1000:
wheel:x:10:app,tool
audio:x:29:tool,app
staff:x:50:
"""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """An image tree with its passwd and group files (no mount needed to read them)."""
    root = tmp_path / "tree"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "passwd").write_text(PASSWD)
    (root / "etc" / "group").write_text(GROUP)
    return root


def test_a_name_takes_its_passwd_entry_and_the_groups_listing_it(tree: Path) -> None:
    assert resolve_user(tree, "app") == Identity(1000, 1000, (10, 29), "/home/app")


def test_a_uid_with_a_passwd_entry_is_that_user(tree: Path) -> None:
    assert resolve_user(tree, "1001") == Identity(1001, 1002, (10, 29), "/opt/tool")


def test_a_uid_without_a_passwd_entry_runs_with_gid_0(tree: Path) -> None:
    assert resolve_user(tree, "4242") == Identity(4242, 0, (), "/")


def test_an_explicit_group_name_replaces_the_primary_group_and_drops_the_others(
    tree: Path,
) -> None:
    assert resolve_user(tree, "app:staff") == Identity(1000, 50, (), "/home/app")


def test_numeric_uid_and_gid_need_no_entries(tree: Path) -> None:
    assert resolve_user(tree, "5000:6000") == Identity(5000, 6000, (), "/")


def test_no_user_is_root(tree: Path) -> None:
    assert resolve_user(tree, "") == Identity(0, 0, (), "/root")


def test_no_user_takes_roots_home_from_the_image(tree: Path) -> None:
    (tree / "etc" / "passwd").write_text("root:x:0:0:root:/var/root:/bin/sh\n")

    assert resolve_user(tree, "").home == "/var/root"


def test_a_uid_without_a_passwd_entry_has_the_root_directory_as_home(tree: Path) -> None:
    assert passwd_home(tree, 4242) == "/"


def test_an_image_without_passwd_gives_root_the_root_directory_as_home(tmp_path: Path) -> None:
    assert passwd_home(tmp_path, 0) == "/"


def test_an_unknown_user_name_is_refused_naming_it(tree: Path) -> None:
    with pytest.raises(InvalidArgument, match=r"'nobody'.*/etc/passwd"):
        resolve_user(tree, "nobody")


def test_an_unknown_group_name_is_refused_naming_it(tree: Path) -> None:
    with pytest.raises(InvalidArgument, match=r"'video'.*/etc/group"):
        resolve_user(tree, "app:video")


def test_a_malformed_line_matches_nothing_and_breaks_no_other_lookup(tree: Path) -> None:
    with (tree / "etc" / "passwd").open("a") as passwd:
        passwd.write("broken:x:not-a-number:1::/:/bin/sh\nhuge:x:99999999999:1::/:/bin/sh\n")

    assert resolve_user(tree, "tool").uid == 1001
    with pytest.raises(InvalidArgument, match="'broken'"):
        resolve_user(tree, "broken")


def test_a_name_in_an_image_without_passwd_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="'app'"):
        resolve_user(tmp_path, "app")


def test_an_absolute_symlink_is_followed_inside_the_image_not_on_the_host(tree: Path) -> None:
    (tree / "etc" / "passwd").unlink()
    (tree / "usr" / "lib").mkdir(parents=True)
    (tree / "usr" / "lib" / "passwd").write_text("runner:x:2000:2000::/srv:/bin/sh\n")
    # on the host /etc/passwd exists and knows no "runner": only the image's file does
    os.symlink("/usr/lib/passwd", tree / "etc" / "passwd")

    assert resolve_user(tree, "runner").uid == 2000


def test_a_relative_symlink_is_followed_from_its_directory(tree: Path) -> None:
    (tree / "etc" / "group").rename(tree / "etc" / "group.real")
    os.symlink("group.real", tree / "etc" / "group")

    assert resolve_user(tree, "app").groups == (10, 29)


@pytest.mark.root
def test_image_identity_reads_the_mounted_erofs_image_and_leaves_no_mount(
    rootfs: Path, tmp_path: Path, session_state_dir: Path, find_leftovers
) -> None:
    tree = tmp_path / "rootfs"
    shutil.copytree(rootfs, tree, symlinks=True)
    (tree / "etc" / "passwd").write_text(PASSWD)
    (tree / "etc" / "group").write_text(GROUP)
    image = tmp_path / "users.erofs"
    subprocess.run(
        [sys.executable, "-m", "fuzzball_runtime.cli", "build-image", str(tree), str(image)],
        check=True,
        capture_output=True,
    )

    identity = image_identity(image, "app", session_state_dir)

    assert identity == Identity(1000, 1000, (10, 29), "/home/app")
    assert find_leftovers(session_state_dir, image) == []


@pytest.mark.root
def test_a_working_directory_missing_from_the_image_is_created(run) -> None:
    status, output = run("pwd; ls -ld . | cut -c1-10", cwd="/srv/work/deep")

    assert status.exit_code == 0
    assert output.split() == ["/srv/work/deep", "drwxr-xr-x"]


@pytest.mark.root
def test_the_command_runs_as_the_resolved_ids_with_its_groups(run) -> None:
    status, output = run(
        "grep -E '^(Uid|Gid|Groups):' /proc/self/status", uid=1000, gid=1000, groups=[10, 29]
    )

    assert status.exit_code == 0
    assert output.split() == [
        "Uid:", "1000", "1000", "1000", "1000",
        "Gid:", "1000", "1000", "1000", "1000",
        "Groups:", "10", "29",
    ]  # fmt: skip


@pytest.mark.root
def test_without_home_in_the_environment_root_gets_its_passwd_home(run) -> None:
    # the test image's /etc/passwd: root:x:0:0:root:/root:/bin/sh
    status, output = run('echo "$HOME"')

    assert status.exit_code == 0
    assert output == "/root\n"


@pytest.mark.root
def test_a_uid_without_a_passwd_entry_gets_the_root_directory_as_home(run) -> None:
    status, output = run('echo "$HOME"', uid=4242, gid=4242)

    assert status.exit_code == 0
    assert output == "/\n"


@pytest.mark.root
def test_home_set_in_the_environment_is_kept(run) -> None:
    status, output = run('echo "$HOME"', env={"PATH": "/bin", "HOME": "/work"})

    assert status.exit_code == 0
    assert output == "/work\n"
