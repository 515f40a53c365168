"""Regenerate the committed Python stubs of every ``.proto`` in ``fuzzball_core/api/v1``.

``python -m fuzzball_core.api.generate`` writes ``*_pb2.py``, ``*_pb2.pyi`` and
``*_pb2_grpc.py`` next to each proto, with import paths rooted at the repository
(``from fuzzball_core.api.v1 import client_pb2``). The output depends on the grpcio-tools
version, which the test extras pin (``GRPCIO_TOOLS_VERSION``); a test regenerates into a
temporary folder and fails if the committed files differ.
"""

from __future__ import annotations

import sys
from importlib import metadata, resources
from pathlib import Path

from fuzzball_core.errors import FailedPrecondition, Internal

#: The grpcio-tools release the committed stubs were generated with.
GRPCIO_TOOLS_VERSION = "1.85.1"

#: The folder holding ``fuzzball_core`` (the proto import root).
SOURCE_ROOT = Path(__file__).resolve().parents[2]
PROTO_DIR = SOURCE_ROOT / "fuzzball_core" / "api" / "v1"


def proto_files() -> list[Path]:
    """Every proto of the API, relative to :data:`SOURCE_ROOT`, in a stable order."""
    return sorted(p.relative_to(SOURCE_ROOT) for p in PROTO_DIR.glob("*.proto"))


def generate(out_root: Path = SOURCE_ROOT) -> list[Path]:
    """Run protoc over :func:`proto_files` into ``out_root``; return the files written.

    ``FailedPrecondition`` if grpcio-tools is missing or not the pinned version (another
    version writes different stubs); ``Internal`` if protoc fails.
    """
    try:
        from grpc_tools import protoc
    except ImportError:
        raise FailedPrecondition(
            f"grpcio-tools is not installed: pip install grpcio-tools=={GRPCIO_TOOLS_VERSION}"
        ) from None
    installed = metadata.version("grpcio-tools")
    if installed != GRPCIO_TOOLS_VERSION:
        raise FailedPrecondition(
            f"grpcio-tools {installed} is installed but the stubs are generated with "
            f"{GRPCIO_TOOLS_VERSION}: pip install grpcio-tools=={GRPCIO_TOOLS_VERSION}"
        )
    well_known = resources.files("grpc_tools") / "_proto"
    protos = [str(p) for p in proto_files()]
    args = [
        "grpc_tools.protoc",
        f"-I{SOURCE_ROOT}",
        f"-I{well_known}",
        f"--python_out={out_root}",
        f"--pyi_out={out_root}",
        f"--grpc_python_out={out_root}",
        *(str(SOURCE_ROOT / p) for p in protos),
    ]
    if protoc.main(args) != 0:
        raise Internal(f"protoc failed on {', '.join(protos)} (its errors are printed above)")
    return sorted(
        out_root / p.parent / f"{p.stem}{suffix}"
        for p in proto_files()
        for suffix in ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")
    )


def main() -> None:
    """Console entry: regenerate in place and list the files written."""
    try:
        written = generate()
    except (FailedPrecondition, Internal) as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
    for path in written:
        print(path.relative_to(SOURCE_ROOT))


if __name__ == "__main__":
    main()
