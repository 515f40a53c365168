"""Build script of the endpoint proxy's C part, ``fuzzball_core.orchestrate._head``.

setup.py names ``ffibuilder`` in ``cffi_modules``, so the module is compiled at install time
(``pip install -e .``) from ``request_head.c`` and llhttp's C sources, vendored unmodified in
``llhttp/`` (see README.md beside this file); its cdef is the marked section of
``request_head.h``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from cffi import FFI

CSRC = Path(__file__).resolve().parent
LLHTTP = CSRC / "llhttp"
ROOT = CSRC.parents[2]
CDEF_BEGIN = "/* cffi-cdef-begin */"
CDEF_END = "/* cffi-cdef-end */"


def _cdef() -> str:
    text = (CSRC / "request_head.h").read_text()
    begin, end = text.find(CDEF_BEGIN), text.find(CDEF_END)
    if begin < 0 or end < begin:
        raise RuntimeError(f"request_head.h: no {CDEF_BEGIN} ... {CDEF_END} section")
    return text[begin + len(CDEF_BEGIN) : end]


def _sources(*, relative: bool) -> list[str]:
    """The C files: named from the repository's root for setuptools (``relative``), in
    full for a build in a scratch folder."""
    llhttp = (LLHTTP / "src" / name for name in ("api.c", "http.c", "llhttp.c"))
    files = [CSRC / "request_head.c", *llhttp]
    return [str(f.relative_to(ROOT)) if relative else str(f) for f in files]


def _builder(sources: list[str]) -> FFI:
    builder = FFI()
    builder.cdef(_cdef())
    builder.set_source(
        "fuzzball_core.orchestrate._head",
        '#include "request_head.h"',
        sources=sources,
        include_dirs=[str(CSRC), str(LLHTTP / "include")],
        extra_compile_args=["-O2", "-Wall"],
    )
    return builder


ffibuilder = _builder(_sources(relative=True))

if __name__ == "__main__":
    # built in a scratch folder (cffi writes its generated C there), then installed under
    # the name an editable install gives it, so one module is there to import; replaced,
    # not written over: a running proxy that mapped the old one keeps it
    with tempfile.TemporaryDirectory() as scratch:
        built = Path(_builder(_sources(relative=False)).compile(tmpdir=scratch, verbose=True))
        target = CSRC.parent / "_head.abi3.so"
        shutil.copy2(built, target.with_suffix(".new"))
        os.replace(target.with_suffix(".new"), target)
        # a full-tagged build, which the import would prefer
        (CSRC.parent / built.name).unlink(missing_ok=True)
