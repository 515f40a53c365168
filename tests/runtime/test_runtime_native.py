"""The compiled C module: its interface comes from the header, and a stale build is refused."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fuzzball_runtime import build_ffi
from fuzzball_runtime.errors import AbiMismatch
from fuzzball_runtime.native import ABI_VERSION, check_abi, lib


def test_a_module_of_another_abi_version_is_refused_naming_both() -> None:
    with pytest.raises(AbiMismatch, match=f"version {ABI_VERSION + 1}.*version {ABI_VERSION}"):
        check_abi(ABI_VERSION + 1)


def test_the_loaded_module_has_the_abi_version_of_the_header_and_the_package() -> None:
    header = (build_ffi.CSRC / "fbrt.h").read_text()
    declared = int(re.search(r"#define FBRT_ABI_VERSION (\d+)", header).group(1))
    assert lib.fbrt_abi_version() == declared == ABI_VERSION


def test_the_cdef_is_the_marked_section_of_the_header() -> None:
    cdef = build_ffi.cdef_from_header()
    assert "int fbrt_container_start(const struct fbrt_spec *spec" in cdef
    assert "#" not in cdef  # no preprocessor line reaches cffi


def test_a_header_without_the_markers_is_refused(tmp_path: Path) -> None:
    header = tmp_path / "fbrt.h"
    header.write_text("int fbrt_abi_version(void);\n")
    with pytest.raises(RuntimeError, match="cffi-cdef-begin"):
        build_ffi.cdef_from_header(header)
