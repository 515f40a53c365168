"""A SIF image's Apptainer environment scripts are found in its unpacked tree: their names, in
the order Apptainer sources them, and whether the image has the /bin/sh to source them
with, all read inside the tree (symlinks followed within it, never the host's)."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from fuzzball_core.drivers import ENV_SCRIPTS_KEY, ImageConfig
from fuzzball_plugins.images.sif import with_env_scripts

BASE = ImageConfig(env=("PATH=/bin",), cmd=("/.singularity.d/runscript",))


def _tree(root: Path, *scripts: str, shell: bool = True) -> Path:
    env = root / ".singularity.d/env"
    env.mkdir(parents=True)
    for name in scripts:
        (env / name).write_text(f"# {name}\n")
    (root / "bin").mkdir()
    if shell:
        (root / "bin/busybox").write_bytes(b"\x7fELF")
        (root / "bin/busybox").chmod(0o755)
        os.symlink("busybox", root / "bin/sh")
    return root


def test_the_scripts_are_named_in_the_order_apptainer_sources_them(tmp_path: Path) -> None:
    root = _tree(tmp_path, "99-base.sh", "90-environment.sh", "10-docker2singularity.sh")

    config = with_env_scripts(BASE, root)

    assert config.env_scripts == ("10-docker2singularity.sh", "90-environment.sh", "99-base.sh")
    assert config.env_shell is True
    assert (config.env, config.cmd) == (BASE.env, BASE.cmd)


def test_only_files_ending_in_sh_are_scripts(tmp_path: Path) -> None:
    root = _tree(tmp_path, "90-environment.sh", "README")
    (root / ".singularity.d/env/95-apps.sh").mkdir()
    os.symlink("90-environment.sh", root / ".singularity.d/env/91-environment.sh")
    os.symlink("/nowhere.sh", root / ".singularity.d/env/92-dangling.sh")

    config = with_env_scripts(BASE, root)

    assert config.env_scripts == ("90-environment.sh", "91-environment.sh")


def test_a_tree_without_env_scripts_is_noted_as_having_none(tmp_path: Path) -> None:
    noted = replace(BASE, env_scripts=())

    assert with_env_scripts(BASE, _tree(tmp_path / "empty")) == noted
    (tmp_path / "bare").mkdir()
    assert with_env_scripts(BASE, tmp_path / "bare") == noted


def test_a_tree_without_bin_sh_has_scripts_and_no_shell(tmp_path: Path) -> None:
    config = with_env_scripts(BASE, _tree(tmp_path, "90-environment.sh", shell=False))

    assert config.env_scripts == ("90-environment.sh",)
    assert config.env_shell is False


def test_bin_sh_is_followed_inside_the_tree_not_on_the_host(tmp_path: Path) -> None:
    root = _tree(tmp_path, "90-environment.sh", shell=False)
    # the host has a /bin/busybox; the tree does not
    os.symlink("/bin/busybox", root / "bin/sh")

    assert with_env_scripts(BASE, root).env_shell is False


def test_bin_sh_is_found_through_a_merged_usr_link(tmp_path: Path) -> None:
    root = tmp_path
    (root / ".singularity.d/env").mkdir(parents=True)
    (root / ".singularity.d/env/90-environment.sh").write_text("export A=1\n")
    (root / "usr/bin").mkdir(parents=True)
    (root / "usr/bin/dash").write_bytes(b"\x7fELF")
    (root / "usr/bin/dash").chmod(0o755)
    os.symlink("dash", root / "usr/bin/sh")
    os.symlink("usr/bin", root / "bin")

    assert with_env_scripts(BASE, root).env_shell is True


def test_a_bin_sh_that_is_not_executable_is_no_shell(tmp_path: Path) -> None:
    root = _tree(tmp_path, "90-environment.sh")
    (root / "bin/busybox").chmod(0o644)

    assert with_env_scripts(BASE, root).env_shell is False


def test_the_kept_config_carries_the_scripts_and_reads_them_back(tmp_path: Path) -> None:
    config = with_env_scripts(BASE, _tree(tmp_path, "90-environment.sh"))

    assert ImageConfig.from_oci(config.as_oci()) == config


def test_a_config_nobody_looked_at_for_scripts_keeps_its_document_as_before() -> None:
    assert BASE.env_scripts is None
    assert set(BASE.as_oci()) == {"Env", "Cmd"}
    assert ImageConfig.from_oci(BASE.as_oci()).env_scripts is None


def test_a_tree_without_scripts_is_kept_as_looked_at(tmp_path: Path) -> None:
    (tmp_path / "bare").mkdir()
    document = with_env_scripts(BASE, tmp_path / "bare").as_oci()

    assert document[ENV_SCRIPTS_KEY] == []
    assert ImageConfig.from_oci(document).env_scripts == ()
