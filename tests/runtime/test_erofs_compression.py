"""Compression ``auto``: lz4 for content it shrinks, none for content it cannot."""

from __future__ import annotations

import io
import os
import shutil
import tarfile
from pathlib import Path

import pytest

from fuzzball_runtime.erofs import AUTO_COMPRESSION, DEFAULT_COMPRESSION, LayerBuild

pytestmark = pytest.mark.skipif(shutil.which("mkfs.erofs") is None, reason="needs erofs-utils")


def _layer(path: Path, files: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


TEXT = b"".join(b"%d the quick brown fox jumps over the lazy dog\n" % n for n in range(60000))


def test_random_data_is_built_without_compression(tmp_path: Path) -> None:
    build = LayerBuild(tmp_path, compression=AUTO_COMPRESSION)
    build.apply(_layer(tmp_path / "a.tar.gz", {"weights.bin": os.urandom(3 << 20)}))

    assert build.chosen_compression() is None
    image = build.build(tmp_path / "random.erofs")
    assert image.stat().st_size >= 3 << 20


def test_text_is_compressed_with_lz4(tmp_path: Path) -> None:
    build = LayerBuild(tmp_path, compression=AUTO_COMPRESSION)
    build.apply(_layer(tmp_path / "a.tar.gz", {"log.txt": TEXT}))

    assert build.chosen_compression() == DEFAULT_COMPRESSION
    assert build.build(tmp_path / "text.erofs").stat().st_size < len(TEXT) // 2


def test_mostly_compressible_content_across_layers_is_compressed(tmp_path: Path) -> None:
    build = LayerBuild(tmp_path, compression=AUTO_COMPRESSION)
    build.apply(_layer(tmp_path / "a.tar.gz", {"log.txt": TEXT * 3}))
    build.apply(_layer(tmp_path / "b.tar.gz", {"blob.bin": os.urandom(len(TEXT))}))

    assert build.chosen_compression() == DEFAULT_COMPRESSION


def test_an_explicit_compression_is_kept_whatever_the_content(tmp_path: Path) -> None:
    build = LayerBuild(tmp_path, compression=DEFAULT_COMPRESSION)
    build.apply(_layer(tmp_path / "a.tar.gz", {"weights.bin": os.urandom(1 << 20)}))

    assert build.chosen_compression() == DEFAULT_COMPRESSION
