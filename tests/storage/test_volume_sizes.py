"""A volume's size as the node measures it: the disk its files use, like ``du``."""

from __future__ import annotations

import os
from pathlib import Path

from fuzzball_core.substrate.volume_sizes import disk_usage, measured


def _blocks(path: Path) -> int:
    return os.lstat(path).st_blocks * 512


def test_the_size_counts_the_blocks_of_every_file_and_directory(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a").write_bytes(os.urandom(100_000))
    (tmp_path / "b").write_bytes(os.urandom(5_000))
    expected = sum(_blocks(p) for p in (tmp_path, tmp_path / "sub", tmp_path / "sub" / "a"))
    assert disk_usage(tmp_path) == expected + _blocks(tmp_path / "b")


def test_a_file_with_two_hard_links_is_counted_once(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(os.urandom(50_000))
    alone = disk_usage(tmp_path)
    os.link(tmp_path / "a", tmp_path / "b")
    assert disk_usage(tmp_path) == alone


def test_a_symlink_out_of_the_volume_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "big").write_bytes(os.urandom(200_000))
    volume = tmp_path / "volume"
    volume.mkdir()
    (volume / "link").symlink_to(outside)
    assert disk_usage(volume) == _blocks(volume) + _blocks(volume / "link")


def test_a_volume_not_measured_within_the_budget_is_left_out(tmp_path: Path) -> None:
    (tmp_path / "v").mkdir()
    assert disk_usage(tmp_path / "v", budget=-1) is None
    assert measured({"vol-1": tmp_path / "v"}, budget=-1) == {}


def test_a_missing_directory_is_left_out(tmp_path: Path) -> None:
    assert measured({"vol-1": tmp_path / "gone"}) == {}
