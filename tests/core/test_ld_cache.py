"""The dynamic linker's cache, read as ``ldconfig -p`` prints it (the NVIDIA device plugin
finds the driver's libraries through it)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.fake_nvidia_driver import write_ld_cache

from fuzzball_plugins.devices import ld_cache

HOST_CACHE = Path("/etc/ld.so.cache")


@pytest.mark.skipif(
    not HOST_CACHE.is_file() or shutil.which("ldconfig") is None or sys.platform != "linux",
    reason="needs glibc's ldconfig and its cache",
)
def test_this_hosts_cache_reads_as_ldconfig_prints_it() -> None:
    printed = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=True)
    lines = (
        re.fullmatch(r"\s+(\S+) \(.*\) => (\S+)", line) for line in printed.stdout.splitlines()
    )
    expected = [(m.group(1), m.group(2)) for m in lines if m]

    entries = ld_cache.read(HOST_CACHE)

    assert [(e.name, e.path) for e in entries] == expected


def test_entries_keep_their_order_names_paths_and_flags(tmp_path) -> None:
    cache = tmp_path / "ld.so.cache"
    write_ld_cache(
        cache,
        [
            ("libcuda.so.1", "/usr/lib64/libcuda.so.1", 0x0303),
            ("libm.so.6", "/lib/libm.so.6", 0x0003),
        ],
    )

    assert ld_cache.read(cache) == [
        ld_cache.CacheEntry("libcuda.so.1", "/usr/lib64/libcuda.so.1", 0x0303),
        ld_cache.CacheEntry("libm.so.6", "/lib/libm.so.6", 0x0003),
    ]


def test_the_new_table_after_an_old_format_table_is_read(tmp_path) -> None:
    new = tmp_path / "new"
    write_ld_cache(new, [("libcuda.so.1", "/usr/lib64/libcuda.so.1", 0x0303)])
    # glibc before 2.32: "ld.so-1.7.0", one old entry (12 bytes), padding to 8, the new table
    old_table = ld_cache.OLD_MAGIC + b"\0" + (1).to_bytes(4, sys.byteorder) + bytes(12) + bytes(4)

    entries = ld_cache.parse(old_table + new.read_bytes())

    assert [(e.name, e.path) for e in entries] == [("libcuda.so.1", "/usr/lib64/libcuda.so.1")]


def test_a_file_that_is_not_a_cache_is_refused_naming_it(tmp_path) -> None:
    cache = tmp_path / "ld.so.cache"
    cache.write_text("include /etc/ld.so.conf.d/*.conf\n")

    with pytest.raises(ld_cache.LdCacheError, match=f"{cache}: not a dynamic linker cache"):
        ld_cache.read(cache)


def test_a_cache_shorter_than_its_entries_is_refused(tmp_path) -> None:
    cache = tmp_path / "ld.so.cache"
    write_ld_cache(cache, [("libcuda.so.1", "/usr/lib64/libcuda.so.1", 0x0303)])

    with pytest.raises(ld_cache.LdCacheError, match="1 entries announced"):
        ld_cache.parse(cache.read_bytes()[:60])


@pytest.mark.skipif(
    ld_cache.native_flags() == ld_cache.ELF_LIBC6, reason="an architecture without 64-bit flags"
)
def test_a_32_bit_library_is_not_native() -> None:
    assert not ld_cache.is_native(
        ld_cache.CacheEntry("libcuda.so.1", "/usr/lib/libcuda.so.1", ld_cache.ELF_LIBC6)
    )
    assert ld_cache.is_native(
        ld_cache.CacheEntry("libcuda.so.1", "/usr/lib64/libcuda.so.1", ld_cache.native_flags())
    )
