"""The dynamic linker's cache (``/etc/ld.so.cache``), read as ``ldconfig -p`` prints it.

Read rather than asked of ``ldconfig -p`` so that a node agent can read another root's cache
(a containerised agent given the host's ``/`` as ``/host``) and so that tests can hand it a
cache of their own. The layout is glibc's ``dl-cache.h``: the "new" format
(``glibc-ld.so.cache1.1``), alone (glibc 2.32 and later write only it) or after the old
``ld.so-1.7.0`` table that older glibc wrote before it. A cache in the old format alone
(glibc before 2.3) is not read.
"""

from __future__ import annotations

import platform
import struct
from dataclasses import dataclass
from pathlib import Path

OLD_MAGIC = b"ld.so-1.7.0"
NEW_MAGIC = b"glibc-ld.so.cache1.1"

#: an entry's type (the low byte of its flags): an ELF library for glibc's libc6
ELF_LIBC6 = 0x0003
_TYPE_MASK = 0x00FF
_ARCH_MASK = 0xFF00
#: the arch bits of a 64-bit library, by ``platform.machine()`` (dl-cache.h's
#: FLAG_X8664_LIB64, FLAG_AARCH64_LIB64, FLAG_POWERPC_LIB64, FLAG_S390_LIB64)
_LIB64_ARCH = {"x86_64": 0x0300, "aarch64": 0x0A00, "ppc64le": 0x0500, "s390x": 0x0400}

# struct cache_file_new: magic and version, nlibs, len_strings, flags, padding[3],
# extension_offset, unused[3]; then nlibs struct file_entry_new: flags, key, value,
# osversion_unused, hwcap
_NEW_HEADER = struct.Struct("=20sIIB3xI12x")
_NEW_ENTRY = struct.Struct("=iIIIQ")
# struct cache_file: magic[11] (padded to 12), nlibs; then nlibs struct file_entry: flags,
# key, value
_OLD_HEADER = struct.Struct("=11sxI")
_OLD_ENTRY = struct.Struct("=iII")
# the new table follows the old one aligned as struct cache_file_new (its uint64 hwcap)
_NEW_ALIGN = 8


class LdCacheError(ValueError):
    """The file is not a cache this module can read (says which and why)."""


@dataclass(frozen=True)
class CacheEntry:
    """One line of ``ldconfig -p``: a library's name (its soname or link name), the path
    the linker loads for it, and the entry's flags (type and architecture)."""

    name: str
    path: str
    flags: int


def native_flags() -> int:
    """The flags of a 64-bit glibc library of this machine's architecture (``libc6,x86-64``
    on x86_64); just :data:`ELF_LIBC6` on an architecture this module does not know."""
    return ELF_LIBC6 | _LIB64_ARCH.get(platform.machine(), 0)


def is_native(entry: CacheEntry) -> bool:
    """Whether ``entry`` is a library this machine's 64-bit programs load (not a 32-bit or
    x32 build beside it); on an architecture this module does not know, every glibc one."""
    if entry.flags & _TYPE_MASK != ELF_LIBC6:
        return False
    arch = _LIB64_ARCH.get(platform.machine())
    return arch is None or entry.flags & _ARCH_MASK == arch


def parse(data: bytes, source: str = "ld.so.cache") -> list[CacheEntry]:
    """The entries of a cache's bytes, in the cache's order (the linker's preference)."""
    start = _new_table_offset(data, source)
    if len(data) < start + _NEW_HEADER.size:
        raise LdCacheError(f"{source}: truncated header")
    magic, count, _strings, _flags, _extension = _NEW_HEADER.unpack_from(data, start)
    if magic != NEW_MAGIC:
        raise LdCacheError(f"{source}: no {NEW_MAGIC.decode()} table")
    first = start + _NEW_HEADER.size
    if len(data) < first + count * _NEW_ENTRY.size:
        raise LdCacheError(f"{source}: {count} entries announced, the file is shorter")
    entries = []
    for index in range(count):
        flags, key, value, _os, _hwcap = _NEW_ENTRY.unpack_from(
            data, first + index * _NEW_ENTRY.size
        )
        # the new format's string offsets count from the start of its own header
        name, path = _string(data, start + key, source), _string(data, start + value, source)
        entries.append(CacheEntry(name, path, flags))
    return entries


def read(path: Path) -> list[CacheEntry]:
    """The entries of the cache at ``path`` (``OSError`` when it cannot be read,
    :class:`LdCacheError` when it is not a cache)."""
    return parse(path.read_bytes(), str(path))


def _new_table_offset(data: bytes, source: str) -> int:
    if data.startswith(NEW_MAGIC):
        return 0
    if not data.startswith(OLD_MAGIC) or len(data) < _OLD_HEADER.size:
        raise LdCacheError(f"{source}: not a dynamic linker cache")
    (_magic, count) = _OLD_HEADER.unpack_from(data)
    end = _OLD_HEADER.size + count * _OLD_ENTRY.size
    return -(-end // _NEW_ALIGN) * _NEW_ALIGN


def _string(data: bytes, offset: int, source: str) -> str:
    end = data.find(b"\0", offset)
    if offset >= len(data) or end < 0:
        raise LdCacheError(f"{source}: a string offset ({offset}) outside the file")
    return data[offset:end].decode("utf-8", errors="surrogateescape")
