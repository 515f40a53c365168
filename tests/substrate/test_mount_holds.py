"""The agent's holds on recently used image mounts, with the real runtime."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from fuzzball_core.substrate.mount_holds import ImageMountHolds
from fuzzball_runtime import DEVNULL, Container, ContainerSpec, sweep
from fuzzball_runtime.erofs import build_from_dir
from fuzzball_runtime.state import StateDir

pytestmark = pytest.mark.root


def _image(directory: Path, marker: str) -> Path:
    root = directory / f"root-{marker}"
    (root / "bin").mkdir(parents=True)
    shutil.copy("/bin/busybox", root / "bin" / "busybox")
    (root / "marker").write_text(marker)
    return build_from_dir(root, directory / f"{marker}.erofs")


def _mounted(state_dir: Path) -> list[str]:
    state = StateDir(state_dir)
    return [key for key in state.image_keys() if os.path.ismount(state.images / key)]


def test_a_held_image_stays_mounted_after_its_container_ends(tmp_path) -> None:
    image, state_dir = _image(tmp_path, "a"), tmp_path / "state"
    holds = ImageMountHolds(state_dir)
    holds.hold(image)
    spec = ContainerSpec(
        image=image, command=["/bin/busybox", "true"], state_dir=state_dir, stdin=DEVNULL
    )
    with Container(spec).start() as handle:
        assert handle.wait(timeout=30).exit_code == 0

    assert _mounted(state_dir) == [StateDir.image_key(image)]
    holds.release_all()
    assert _mounted(state_dir) == []


def test_only_the_most_recently_used_images_are_kept(tmp_path) -> None:
    images = [_image(tmp_path, marker) for marker in "abc"]
    state_dir = tmp_path / "state"
    holds = ImageMountHolds(state_dir, keep=2)

    for image in [images[0], images[1], images[0], images[2]]:
        holds.hold(image)

    assert holds.held() == [images[0], images[2]]
    assert sorted(_mounted(state_dir)) == sorted(StateDir.image_key(i) for i in holds.held())
    holds.release_all()


def test_the_sweep_of_a_stopped_agent_drops_its_holds(tmp_path) -> None:
    image, state_dir = _image(tmp_path, "a"), tmp_path / "state"
    ImageMountHolds(state_dir).hold(image)  # an agent that ended without releasing them

    sweep(state_dir)

    assert _mounted(state_dir) == []
