"""A layer is applied in one streaming pass: whiteouts and opaque markers hide what lower
layers put there wherever they come in the stream, never what the same layer wrote."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from fuzzball_runtime.layers import apply_layer


def _layer(path: Path, entries: list[tuple[str, bytes | None]]) -> Path:
    """A gzip layer of files (bytes) and directories (None), in the order given."""
    with tarfile.open(path, "w:gz") as tar:
        for name, data in entries:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return path


def _tree(root: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


def _lower(tmp_path: Path) -> Path:
    root = tmp_path / "rootfs"
    root.mkdir()
    apply_layer(
        _layer(
            tmp_path / "lower.tar.gz",
            [("etc", None), ("etc/old.conf", b"old"), ("opt", None), ("opt/a", b"a")],
        ),
        root,
    )
    return root


def test_a_whiteout_after_the_layers_own_file_at_that_path_keeps_the_new_file(
    tmp_path: Path,
) -> None:
    root = _lower(tmp_path)

    apply_layer(
        _layer(tmp_path / "upper.tar.gz", [("etc/old.conf", b"new"), ("etc/.wh.old.conf", b"")]),
        root,
    )

    assert (root / "etc/old.conf").read_bytes() == b"new"


def test_an_opaque_marker_after_new_children_hides_only_the_lower_ones(tmp_path: Path) -> None:
    root = _lower(tmp_path)

    apply_layer(
        _layer(
            tmp_path / "upper.tar.gz",
            [("opt/sub/b", b"b"), ("opt/.wh..wh..opq", b""), ("etc/.wh.old.conf", b"")],
        ),
        root,
    )

    assert _tree(root) == {"etc": None, "opt": None, "opt/sub": None, "opt/sub/b": b"b"}


def test_an_opaque_marker_first_hides_the_lower_children_then_the_new_ones_land(
    tmp_path: Path,
) -> None:
    root = _lower(tmp_path)

    apply_layer(
        _layer(tmp_path / "upper.tar.gz", [("opt/.wh..wh..opq", b""), ("opt/c", b"c")]),
        root,
    )

    assert _tree(root) == {"etc": None, "etc/old.conf": b"old", "opt": None, "opt/c": b"c"}
