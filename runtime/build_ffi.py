"""cffi build script for the node runtime (API / out-of-line mode).

setup.py names this file in ``cffi_modules``; the extension ``fuzzball_runtime._native`` is
compiled at install time by the system C compiler from the sources in ``runtime/csrc/``.
"""

from __future__ import annotations

from pathlib import Path

from cffi import FFI

CSRC = Path(__file__).resolve().parent / "csrc"
SOURCES = sorted(str(p.relative_to(CSRC.parent.parent)) for p in CSRC.glob("*.c"))

ffibuilder = FFI()
ffibuilder.cdef((CSRC / "fbrt.cdef").read_text())
ffibuilder.set_source(
    "fuzzball_runtime._native",
    '#include "fbrt.h"',
    sources=SOURCES,
    include_dirs=[str(CSRC)],
    extra_compile_args=["-Wall", "-Wextra", "-O2", "-D_GNU_SOURCE"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
