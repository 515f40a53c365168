"""The NVIDIA driver's user-space files on the node, as a GPU job's container needs them.

A container given ``/dev/nvidiaN`` still needs the driver's libraries (``libcuda.so.1``,
``libnvidia-ml.so.1``...) and tools (``nvidia-smi``) of exactly the host's driver version:
images do not carry them, since they must match the kernel module. This finds them as
NVIDIA's libnvidia-container (``nvc_info.c``) and Apptainer's ``--nv`` (``nvliblist.conf``)
do: the libraries through the host's dynamic linker cache, the tools on ``PATH``, and, for
GPUs that boot from GSP firmware, the firmware files of the running driver version
(libnvidia-container mounts ``/lib/firmware/nvidia/<version>/gsp*.bin`` read-only: the
kernel module of kernels before 5.7 loads them in the mount namespace of whoever first
opens the GPU, which may be a job's container).

Each file is bound read-only into the container: libraries under :data:`LIBRARY_DIR` by
their cache names (soname, and the ``.so`` link name where the host has one), tools under
:data:`BINARY_DIR` (the directories NVIDIA's CUDA images put on ``LD_LIBRARY_PATH`` and
``PATH``), firmware at its own path. A symlink is resolved, so that the bound file is the
real library under its soname.

The search runs once per agent (:func:`driver_files`, cached) since it reads the whole
linker cache; a driver upgrade needs an agent restart, as it needs a reboot or a module
reload anyway.

The driver's daemons are reached through sockets, which libnvidia-container (``nvc_info.c``,
``lookup_ipcs``) binds read-write at their own paths: the persistence daemon's
(:data:`PERSISTENCED_SOCKET`), the fabric manager's (:data:`FABRICMANAGER_SOCKET`) and the
MPS control daemon's pipe directory (``$CUDA_MPS_PIPE_DIRECTORY`` of the agent's
environment, as libnvidia-container reads its own, else :data:`MPS_PIPE_DIR`). Which paths
those are is settled once per agent (:func:`daemon_paths`); whether each is there is looked
for per job (:func:`daemon_sockets`: a few ``lstat`` calls), since an MPS daemon is often
started after the agent, and a daemon may stop or restart while it runs.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from fuzzball_plugins.devices import ld_cache

log = logging.getLogger(__name__)

#: where a job's container finds the driver's libraries and tools (NVIDIA's CUDA images set
#: ``LD_LIBRARY_PATH=/usr/local/nvidia/lib:/usr/local/nvidia/lib64`` and put
#: ``/usr/local/nvidia/bin`` first on ``PATH``, for nvidia-docker's driver volume)
LIBRARY_DIR = "/usr/local/nvidia/lib64"
BINARY_DIR = "/usr/local/nvidia/bin"
FIRMWARE_DIR = "/lib/firmware/nvidia"

#: the driver's libraries, as libnvidia-container lists them (utility, compute, NGX, video,
#: graphics and the GLVND vendor libraries) with Apptainer's ``nvliblist.conf`` additions
#: that belong to the driver (not GLVND's own loaders, libGL.so or libEGL.so, which the
#: image brings); a name matches the cache's ``NAME`` and ``NAME.*``
LIBRARIES = (
    # utility
    "libnvidia-ml.so",
    "libnvidia-cfg.so",
    "libnvidia-nscq.so",
    # compute
    "libcuda.so",
    "libcudadebugger.so",
    "libnvidia-opencl.so",
    "libnvidia-gpucomp.so",
    "libnvidia-ptxjitcompiler.so",
    "libnvidia-fatbinaryloader.so",
    "libnvidia-allocator.so",
    "libnvidia-compiler.so",
    "libnvidia-pkcs11.so",
    "libnvidia-pkcs11-openssl3.so",
    "libnvidia-nvvm.so",
    "libnvidia-tileiras.so",
    # NGX
    "libnvidia-ngx.so",
    # video
    "libvdpau_nvidia.so",
    "libnvidia-encode.so",
    "libnvidia-opticalflow.so",
    "libnvcuvid.so",
    # graphics
    "libnvidia-eglcore.so",
    "libnvidia-glcore.so",
    "libnvidia-tls.so",
    "libnvidia-glsi.so",
    "libnvidia-fbc.so",
    "libnvidia-ifr.so",
    "libnvidia-rtcore.so",
    "libnvoptix.so",
    # GLVND vendor libraries
    "libGLX_nvidia.so",
    "libEGL_nvidia.so",
    "libGLESv2_nvidia.so",
    "libGLESv1_CM_nvidia.so",
    "libnvidia-glvkspirv.so",
    "libnvidia-cbl.so",
)

#: the driver's tools (libnvidia-container's utility and compute binaries, as Apptainer's
#: ``nvliblist.conf`` lists them)
BINARIES = (
    "nvidia-smi",
    "nvidia-debugdump",
    "nvidia-persistenced",
    "nvidia-cuda-mps-control",
    "nvidia-cuda-mps-server",
)

#: where tools are looked for besides the agent's own ``PATH``
SYSTEM_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")

#: the host daemons' sockets, as libnvidia-container names them (``nvc_internal.h``)
PERSISTENCED_SOCKET = "/var/run/nvidia-persistenced/socket"
FABRICMANAGER_SOCKET = "/var/run/nvidia-fabricmanager/socket"
#: the MPS control daemon's and servers' pipes and sockets, unless the environment names
#: another directory in :data:`MPS_PIPE_DIRECTORY_ENV`
MPS_PIPE_DIR = "/tmp/nvidia-mps"
MPS_PIPE_DIRECTORY_ENV = "CUDA_MPS_PIPE_DIRECTORY"

LD_CACHE = "/etc/ld.so.cache"
#: symlinks followed in one path before it is given up as a loop (the kernel's limit)
_MAX_LINKS = 40
#: "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  ..." (or "... Open Kernel
#: Module for x86_64  550.54.15 ...")
_NVRM_VERSION = re.compile(r"Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)\s")


@dataclass(frozen=True)
class DriverFiles:
    """The driver's user-space files on a node: ``(host path, container path)`` pairs,
    each host path a real file (no symlink left), to bind read-only."""

    version: str | None
    libraries: tuple[tuple[str, str], ...] = ()
    binaries: tuple[tuple[str, str], ...] = ()
    firmware: tuple[tuple[str, str], ...] = ()
    #: why no library was found (empty when some were)
    problem: str = ""

    def binds(self) -> list[tuple[str, str]]:
        """Every file as a ``(host path, container path)`` bind."""
        return [*self.libraries, *self.binaries, *self.firmware]


def host_root(dev_root: Path) -> Path:
    """The root the driver's files are read under for the GPUs under ``dev_root``: a
    containerised agent given the host's ``/dev`` as ``/host/dev`` and its ``/`` as
    ``/host`` reads ``/host``'s linker cache and files; otherwise ``/``."""
    beside = dev_root.parent
    if dev_root != Path("/dev") and (beside / LD_CACHE.lstrip("/")).is_file():
        return beside
    return Path("/")


@functools.cache
def driver_files(root: Path, proc_root: Path) -> DriverFiles:
    """:func:`find_driver_files`, searched once per agent and root (a file it cannot read
    makes it a problem, not a failed device plugin: the node still offers its GPUs)."""
    try:
        found = find_driver_files(root, proc_root)
    except OSError as exc:
        found = DriverFiles(None, problem=f"the driver's files could not be read ({exc})")
    if found.problem:
        log.warning("NVIDIA driver: %s; GPU jobs get the device nodes only", found.problem)
    else:
        log.info(
            "NVIDIA driver %s: %d library names, %d tools and %d firmware files for GPU jobs",
            found.version or "(version unknown)",
            len(found.libraries),
            len(found.binaries),
            len(found.firmware),
        )
    return found


def find_driver_files(
    root: Path, proc_root: Path, search_path: Iterable[str] | None = None
) -> DriverFiles:
    """The driver's libraries (found in ``root``'s linker cache), tools (on ``search_path``,
    by default the agent's ``PATH`` and :data:`SYSTEM_PATH`, under ``root``) and GSP
    firmware, for the driver version ``proc_root``'s ``driver/nvidia/version`` names."""
    version = driver_version(proc_root)
    try:
        entries = ld_cache.read(root / LD_CACHE.lstrip("/"))
    except (OSError, ld_cache.LdCacheError) as exc:
        return DriverFiles(version, problem=f"the linker cache could not be read ({exc})")
    libraries = _libraries(root, entries, version)
    if not libraries:
        where = root / LD_CACHE.lstrip("/")
        wanted = f" of driver {version}" if version else ""
        return DriverFiles(version, problem=f"no NVIDIA driver libraries{wanted} in {where}")
    if version is None:
        version = _version_of(libraries)
    if search_path is None:
        search_path = [*os.environ.get("PATH", "").split(":"), *SYSTEM_PATH]
    return DriverFiles(
        version,
        libraries=tuple(libraries),
        binaries=tuple(_binaries(root, search_path)),
        firmware=tuple(_firmware(root, version)),
    )


def driver_version(proc_root: Path) -> str | None:
    """The loaded kernel module's version (``550.54.15``), None without one."""
    try:
        text = (proc_root / "driver" / "nvidia" / "version").read_text(errors="replace")
    except OSError:
        return None
    match = _NVRM_VERSION.search(text)
    return match.group(1) if match else None


def _libraries(
    root: Path, entries: list[ld_cache.CacheEntry], version: str | None
) -> list[tuple[str, str]]:
    """Each wanted library name of the cache (the first entry of a name: the linker's
    choice) with its real file: of the running driver's version, when it is known, as
    libnvidia-container chooses them (a library left by an older driver is passed over)."""
    found: dict[str, str] = {}
    for entry in entries:
        if entry.name in found or not _wanted(entry.name) or not ld_cache.is_native(entry):
            continue
        real = resolve_in_root(root, entry.path)
        if real is None or not real.is_file():
            continue
        if version is not None and not real.name.endswith(f".so.{version}"):
            log.info("NVIDIA driver: %s is not of driver %s; passed over", real, version)
            continue
        found[entry.name] = str(real)
    return [(real, f"{LIBRARY_DIR}/{name}") for name, real in sorted(found.items())]


def _wanted(name: str) -> bool:
    return any(name == lib or name.startswith(f"{lib}.") for lib in LIBRARIES)


def _version_of(libraries: list[tuple[str, str]]) -> str | None:
    """The version the real ``libcuda.so.<version>`` (or another library) names."""
    for real, _ in libraries:
        match = re.search(r"\.so\.(\d+\.\d+(?:\.\d+)*)$", real)
        if match:
            return match.group(1)
    return None


def _binaries(root: Path, search_path: Iterable[str]) -> list[tuple[str, str]]:
    directories = list(dict.fromkeys(d for d in search_path if d.startswith("/")))
    found = []
    for name in BINARIES:
        for directory in directories:
            real = resolve_in_root(root, f"{directory}/{name}")
            if real is not None and real.is_file() and os.access(real, os.X_OK):
                found.append((str(real), f"{BINARY_DIR}/{name}"))
                break
    return found


def _firmware(root: Path, version: str | None) -> list[tuple[str, str]]:
    if version is None:
        return []
    directory = f"{FIRMWARE_DIR}/{version}"
    host_dir = resolve_in_root(root, directory)
    if host_dir is None or not host_dir.is_dir():
        return []
    found = []
    for name in sorted(f.name for f in host_dir.glob("gsp*.bin")):
        real = resolve_in_root(root, f"{directory}/{name}")
        if real is not None and real.is_file():
            found.append((str(real), f"{directory}/{name}"))
    return found


@dataclass(frozen=True)
class DaemonPath:
    """Where one of the driver's daemons listens: a socket, or (MPS) a directory of them."""

    path: str
    directory: bool = False


@functools.cache
def daemon_paths() -> tuple[DaemonPath, ...]:
    """The daemons' sockets and MPS pipe directory a GPU job is given where the host has
    them, the pipe directory as the agent's environment names it (read once per agent; a
    relative one is left out, said in the log)."""
    mps = os.environ.get(MPS_PIPE_DIRECTORY_ENV) or MPS_PIPE_DIR
    paths = [DaemonPath(PERSISTENCED_SOCKET), DaemonPath(FABRICMANAGER_SOCKET)]
    if mps.startswith("/"):
        paths.append(DaemonPath(os.path.normpath(mps), directory=True))
    else:
        log.warning(
            "NVIDIA driver: %s=%r is not an absolute path; GPU jobs get no MPS pipe directory",
            MPS_PIPE_DIRECTORY_ENV,
            mps,
        )
    return tuple(paths)


def daemon_sockets(root: Path, paths: Iterable[DaemonPath]) -> list[tuple[str, str]]:
    """``(host path, container path)`` of each of ``paths`` there now under ``root``: a
    socket where a socket is wanted, a directory for the MPS pipe directory. The directories
    above it are resolved inside ``root`` (``/var/run`` is a link to ``/run``), but the last
    component must itself be the socket or directory: a symlink there, which anyone can leave
    in ``/tmp``, could otherwise hand every GPU job any directory of the host, writable."""
    found = []
    for wanted in paths:
        where = PurePosixPath(wanted.path)
        parent = resolve_in_root(root, str(where.parent))
        if parent is None:
            continue
        host_path = parent / where.name
        try:
            mode = host_path.lstat().st_mode
        except OSError:
            continue
        if stat.S_ISDIR(mode) if wanted.directory else stat.S_ISSOCK(mode):
            found.append((str(host_path), wanted.path))
    return found


def resolve_in_root(root: Path, path: str) -> Path | None:
    """``path`` as seen from ``root`` (``/`` or a host's root mounted elsewhere), its
    symlinks followed there (an absolute target starts again at ``root``); None when it
    does not exist or loops."""
    pending = list(reversed(PurePosixPath(path).parts[1:]))
    resolved: list[str] = []
    links = 0
    while pending:
        part = pending.pop()
        if part == "..":
            if resolved:
                resolved.pop()
            continue
        if part in ("", "."):
            continue
        candidate = root.joinpath(*resolved, part)
        if candidate.is_symlink():
            links += 1
            if links > _MAX_LINKS:
                return None
            target = PurePosixPath(os.readlink(candidate))
            if target.is_absolute():
                resolved = []
                pending.extend(reversed(target.parts[1:]))
            else:
                pending.extend(reversed(target.parts))
            continue
        resolved.append(part)
    result = root.joinpath(*resolved)
    return result if result.exists() else None
