"""Build script of the node runtime's C parts: the cffi module and the static container init.

setup.py names ``ffibuilder`` in ``cffi_modules``, so the extension ``fuzzball_runtime._native``
is compiled at install time by the system C compiler from the sources in ``runtime/csrc/``;
its cdef is the marked section of ``fbrt.h`` (the header is the one copy of the interface).
setup.py's ``build_ext`` also calls :func:`build_init`, which links ``fbrt-init``, PID 1 of
every container, statically and without the C library's start-up (it must run in images
without a libc, and it starts in every container).
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

from cffi import FFI

CSRC = Path(__file__).resolve().parent / "csrc"
INIT_NAME = "fbrt-init"
# The init is a program of its own; error.c (the async-signal-safe formatter) is shared.
INIT_SOURCES = ("init.c", "init_exec.c", "init_sys.c", "error.c")
# The init runs without the C library's start-up (csrc/init_sys.h): its own _start and raw
# system calls. No stack protector (its canary lives in TLS, which nothing sets up), no PIE
# (nothing would relocate it), no library calls the compiler invents (memset loops into
# memset). glibc's archive is linked last for error.c's strerrordesc_np, a table lookup.
INIT_FLAGS = [
    "-static",
    "-nostdlib",
    "-no-pie",
    "-fno-pie",
    "-ffreestanding",
    "-fno-builtin",
    "-fno-tree-loop-distribute-patterns",
    "-fno-stack-protector",
    "-fno-asynchronous-unwind-tables",
]
INIT_LIBS = ["-lc", "-lgcc"]
CDEF_BEGIN = "/* cffi-cdef-begin */"
CDEF_END = "/* cffi-cdef-end */"
CFLAGS = ["-Wall", "-Wextra", "-O2", "-D_GNU_SOURCE"]


def library_sources() -> list[str]:
    """The C files of the cffi module (every file in csrc/ but the init's own), relative to
    the repository root as setuptools wants them."""
    own = set(INIT_SOURCES) - {"error.c"}
    root = CSRC.parent.parent
    return sorted(str(p.relative_to(root)) for p in CSRC.glob("*.c") if p.name not in own)


def cdef_from_header(header: Path = CSRC / "fbrt.h") -> str:
    """The declarations between the cffi-cdef markers of ``header``."""
    text = header.read_text()
    begin, end = text.find(CDEF_BEGIN), text.find(CDEF_END)
    if begin < 0 or end < begin:
        raise RuntimeError(f"{header}: no {CDEF_BEGIN} ... {CDEF_END} section")
    return text[begin + len(CDEF_BEGIN) : end]


def build_init(out: Path) -> Path:
    """Compile and statically link the container init into ``out``; returns ``out``.

    Uses ``$CC`` when set (else gcc), the same warning flags as the module and
    :data:`INIT_FLAGS`. Raises
    ``RuntimeError`` with the compiler's output when it fails (e.g. no static libc:
    Debian's libc6-dev provides it)."""
    compiler = shlex.split(os.environ.get("CC", "gcc"))
    out.parent.mkdir(parents=True, exist_ok=True)
    command = [
        *compiler,
        *CFLAGS,
        *INIT_FLAGS,
        "-I",
        str(CSRC),
        "-o",
        str(out),
        *(str(CSRC / name) for name in INIT_SOURCES),
        *INIT_LIBS,
    ]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"building {INIT_NAME} failed: {shlex.join(command)}\n{done.stderr}")
    return out


ffibuilder = FFI()
ffibuilder.cdef(cdef_from_header())
ffibuilder.set_source(
    "fuzzball_runtime._native",
    '#include "fbrt.h"',
    sources=library_sources(),
    include_dirs=[str(CSRC)],
    extra_compile_args=CFLAGS,
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
    build_init(Path(__file__).resolve().parent / INIT_NAME)
