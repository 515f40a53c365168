"""C programs for the runtime tests' busybox image, which has no C library to link against:
compiled statically, on demand, with the host's C compiler."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def build_static_program(directory: Path, name: str, source: str) -> Path:
    """``source`` compiled statically as ``directory/name``; skips the test without a C
    compiler that can link statically."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip(f"needs a C compiler to build {name}")
    source_file = directory / f"{name}.c"
    source_file.write_text(source)
    binary = directory / name
    result = subprocess.run(
        [compiler, "-static", "-O", "-o", str(binary), str(source_file)], capture_output=True
    )
    if result.returncode != 0:
        pytest.skip(f"cannot link a static binary: {result.stderr.decode(errors='replace')}")
    return binary
