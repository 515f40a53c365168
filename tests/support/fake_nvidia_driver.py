"""A fake NVIDIA driver laid out under a directory as the real one is under ``/``: GPU
device nodes (plain files) in ``dev/``, the kernel module's ``proc/driver/nvidia/version``,
versioned libraries with their soname links in ``usr/lib64/`` listed in an
``etc/ld.so.cache`` written in glibc's format, ``nvidia-smi`` in ``usr/bin/``, GSP
firmware in ``lib/firmware/nvidia/<version>/`` and the persistence daemon's socket (a real
unix socket, nobody listening unless a test does: :func:`listen`) under ``var/run``, a
symlink to ``run`` as on most hosts.

The NVIDIA device plugin reads such a directory as the host's root when its ``dev-root`` is
the ``dev/`` inside it (``nvidia_driver.host_root``).
"""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path

from fuzzball_plugins.devices import ld_cache

VERSION = "550.54.15"
#: the libraries made, by soname
SONAMES = ("libcuda.so.1", "libnvidia-ml.so.1", "libnvidia-ptxjitcompiler.so.1")
LIB_DIR = "usr/lib64"
SMI_OUTPUT = "NVIDIA-SMI 550.54.15 (fake)"
#: the persistence daemon's socket, as a job sees it (and, under the fake root, the host)
PERSISTENCED_SOCKET = "/var/run/nvidia-persistenced/socket"


def listen(path: Path) -> socket.socket:
    """A unix stream socket listening at ``path`` (any file there replaced), bound through
    its directory's descriptor so that a path longer than ``sun_path`` holds works."""
    path.unlink(missing_ok=True)
    directory = os.open(path.parent, os.O_PATH | os.O_DIRECTORY)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(f"/proc/self/fd/{directory}/{path.name}")
        server.listen()
    except OSError:
        server.close()
        raise
    finally:
        os.close(directory)
    return server


def on_host(root: Path, path: str) -> Path:
    """Where the fake host's ``path`` lies under its ``root``: its ``/var/run`` is ``/run``
    (followed here, not through the link, whose target is absolute)."""
    if path.startswith("/var/run/"):
        path = path.removeprefix("/var")
    return root / path.lstrip("/")


def make_socket(path: Path) -> Path:
    """A unix socket file at ``path`` that nothing listens on (as a stopped daemon's)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    listen(path).close()
    return path


def write_ld_cache(path: Path, entries: list[tuple[str, str, int]]) -> None:
    """A ``glibc-ld.so.cache1.1`` file listing ``(name, path, flags)`` entries in order."""
    header = struct.Struct("=20sIIB3xI12x")
    entry = struct.Struct("=iIIIQ")
    strings = bytearray()
    offsets = []
    base = header.size + len(entries) * entry.size
    for name, target, _ in entries:
        key = base + len(strings)
        strings += name.encode() + b"\0"
        value = base + len(strings)
        strings += target.encode() + b"\0"
        offsets.append((key, value))
    data = bytearray(header.pack(ld_cache.NEW_MAGIC, len(entries), len(strings), 2, 0))
    for (_, _, flags), (key, value) in zip(entries, offsets, strict=True):
        data += entry.pack(flags, key, value, 0, 0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes(data + strings))


def make_driver(
    root: Path,
    *,
    gpus: int = 1,
    version: str = VERSION,
    libraries: bool = True,
    extra_entries: list[tuple[str, str, int]] | None = None,
    persistenced: bool = True,
) -> Path:
    """Lay the fake driver out under ``root``; its ``dev`` directory (the plugin's
    ``dev-root``). ``libraries=False`` leaves the driver's libraries out of the cache;
    ``persistenced=False`` the persistence daemon's socket out."""
    dev = root / "dev"
    dev.mkdir(parents=True, exist_ok=True)
    for name in ("nvidiactl", "nvidia-uvm", *(f"nvidia{i}" for i in range(gpus))):
        (dev / name).touch()
    proc = root / "proc" / "driver" / "nvidia"
    proc.mkdir(parents=True, exist_ok=True)
    (proc / "version").write_text(
        f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {version}  Release Build\n"
        "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"
    )
    lib_dir = root / LIB_DIR
    lib_dir.mkdir(parents=True, exist_ok=True)
    entries: list[tuple[str, str, int]] = []
    for soname in SONAMES:
        real = soname.rsplit(".", 1)[0] + f".{version}"  # libcuda.so.550.54.15
        (lib_dir / real).write_text(f"fake {real}\n")
        (lib_dir / soname).symlink_to(real)
        if libraries:
            entries.append((soname, f"/{LIB_DIR}/{soname}", ld_cache.native_flags()))
    entries.append(("libc.so.6", f"/{LIB_DIR}/libc.so.6", ld_cache.native_flags()))
    write_ld_cache(root / "etc" / "ld.so.cache", entries + (extra_entries or []))
    bin_dir = root / "usr" / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\necho '{SMI_OUTPUT}'\n")
    smi.chmod(0o755)
    firmware = root / "lib" / "firmware" / "nvidia" / version
    firmware.mkdir(parents=True, exist_ok=True)
    (firmware / "gsp_ga10x.bin").write_bytes(b"\x7fELF fake firmware")
    (root / "run").mkdir(exist_ok=True)
    (root / "var").mkdir(exist_ok=True)
    if not (root / "var" / "run").is_symlink():
        (root / "var" / "run").symlink_to("/run")  # absolute, as on the host
    if persistenced:
        make_socket(on_host(root, PERSISTENCED_SOCKET))
    return dev
