"""Compression ``auto``: lz4 for content it shrinks, none for content it cannot."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from fuzzball_runtime.erofs import (
    AUTO_COMPRESSION,
    DEFAULT_COMPRESSION,
    LayerBuild,
    build_from_dir,
    write_compress_hints,
)

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


def _compressed(image: Path, path: str) -> bool:
    """Whether dump.erofs shows ``path`` in a compressed layout (EROFS data layouts 1 and
    3; 0 and 2 are flat)."""
    shown = subprocess.run(
        ["dump.erofs", f"--path={path}", str(image)], capture_output=True, text=True, check=True
    ).stdout
    return shown.split("Layout: ", 1)[1].split()[0] in ("1", "3")


def test_files_named_in_compress_hints_are_stored_uncompressed(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "dir.d").mkdir(parents=True)
    for name in ("dir.d/a+b[1].txt", "dir.d/aXb[1].txt", "plain.txt"):
        (tree / name).write_bytes(TEXT)
    hints = tmp_path / "hints"

    named = write_compress_hints(["dir.d/a+b[1].txt", "with space.bin"], hints)
    image = build_from_dir(tree, tmp_path / "hinted.erofs", hints=hints)

    assert named == 1  # a path with white space cannot be written into the hints file
    assert not _compressed(image, "/dir.d/a+b[1].txt")
    assert _compressed(image, "/dir.d/aXb[1].txt")  # the "+" and "." matched literally
    assert _compressed(image, "/plain.txt")


def test_mixed_content_compresses_the_text_and_names_the_incompressible_files(
    tmp_path: Path,
) -> None:
    build = LayerBuild(tmp_path, compression=AUTO_COMPRESSION)
    build.apply(_layer(tmp_path / "a.tar.gz", {"log.txt": TEXT * 3}))
    build.apply(_layer(tmp_path / "b.tar.gz", {"models/w.bin": os.urandom(1 << 20)}))

    image = build.build(tmp_path / "mixed.erofs")

    assert build.incompressible() == ["models/w.bin"]
    assert _compressed(image, "/log.txt")
    assert not _compressed(image, "/models/w.bin")
