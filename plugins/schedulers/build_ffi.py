"""Build script of the default scheduler's C free-capacity index (``csrc/free_index.c``).

setup.py names ``ffibuilder`` in ``cffi_modules``, so the extension
``fuzzball_plugins.schedulers._free_index`` is compiled at install time by the system C
compiler; its cdef is the marked section of ``csrc/free_index.h`` (the header is the one copy
of the interface). ``python3 plugins/schedulers/build_ffi.py`` builds it in place.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from cffi import FFI

CSRC = Path(__file__).resolve().parent / "csrc"
CDEF_BEGIN = "/* cffi-cdef-begin */"
CDEF_END = "/* cffi-cdef-end */"
CFLAGS = ["-Wall", "-Wextra", "-O2"]


def cdef_from_header(header: Path = CSRC / "free_index.h") -> str:
    """The declarations between the cffi-cdef markers of ``header``."""
    text = header.read_text()
    begin, end = text.find(CDEF_BEGIN), text.find(CDEF_END)
    if begin < 0 or end < begin:
        raise RuntimeError(f"{header}: no {CDEF_BEGIN} ... {CDEF_END} section")
    return text[begin + len(CDEF_BEGIN) : end]


def builder(folder: str) -> FFI:
    """The module's builder, compiling the C sources of ``folder`` (free_index.c, the free
    index; end_times.c, the running jobs' ends)."""
    ffi = FFI()
    ffi.cdef(cdef_from_header())
    ffi.set_source(
        "fuzzball_plugins.schedulers._free_index",
        '#include "free_index.h"',
        sources=[
            f"{folder}/free_index.c",
            f"{folder}/end_times.c",
            f"{folder}/place_run.c",
        ],
        include_dirs=[str(CSRC)],
        extra_compile_args=CFLAGS,
    )
    return ffi


# setuptools wants the sources named from the repository root
ffibuilder = builder("plugins/schedulers/csrc")

if __name__ == "__main__":
    # built in a scratch folder (cffi writes its generated C there), the module copied in
    with tempfile.TemporaryDirectory() as scratch:
        built = builder(str(CSRC)).compile(tmpdir=scratch, verbose=True)
        # under the name setuptools gives it (an editable install's), so one module is
        # there to import; replaced, not written over: a process that mapped the old one
        # keeps it
        target = CSRC.parent / "_free_index.abi3.so"
        shutil.copy2(built, target.with_suffix(".new"))
        os.replace(target.with_suffix(".new"), target)
        # a build of this script's older versions, which the import would prefer
        (CSRC.parent / Path(built).name).unlink(missing_ok=True)
