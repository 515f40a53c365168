"""Build script of the endpoint proxy's C part, ``fuzzball_core.orchestrate._head``.

setup.py names ``ffibuilder`` in ``cffi_modules``, so the module is compiled at install time
(``pip install -e .``) from ``request_head.c`` and llhttp's C sources, vendored unmodified in
``llhttp/`` (see README.md beside this file); its cdef is the marked section of
``request_head.h``.
"""

from __future__ import annotations

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


def _sources() -> list[str]:
    # relative to the repository root, as setuptools wants them
    files = [
        CSRC / "request_head.c",
        *(LLHTTP / "src" / n for n in ("api.c", "http.c", "llhttp.c")),
    ]
    return [str(f.relative_to(ROOT)) for f in files]


ffibuilder = FFI()
ffibuilder.cdef(_cdef())
ffibuilder.set_source(
    "fuzzball_core.orchestrate._head",
    '#include "request_head.h"',
    sources=_sources(),
    include_dirs=[str(CSRC), str(LLHTTP / "include")],
    extra_compile_args=["-O2", "-Wall"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
