"""The node's hardware topology as hwloc sees it, discovered once and handed to a multinode
job's ranks (the cores Substrate pins jobs to are :mod:`fuzzball_core.substrate.topology`).

MPI libraries discover the node's topology through hwloc as each rank starts (MPICH in
``MPI_Init``; Open MPI in ``mpirun``, its daemons and its ranks). Inside a container that
means walking /sys: in traces of a 2-rank MPICH part it took ~170 ms of each rank's start.
Resource managers avoid it by handing the ranks a topology discovered beforehand (Slurm and
Flux do the same); here Substrate exports the node's topology to an hwloc XML file the first
time a multinode part needs it, binds it read-only into the part's container and points
hwloc at it (``HWLOC_XMLFILE``). ``HWLOC_THISSYSTEM=1`` says the file describes this very
machine, so binding ranks to cores still works; ``HWLOC_THISSYSTEM_ALLOWED_RESOURCES=1``
makes hwloc read which CPUs and memory the container may use from the kernel (its cpuset),
not from the file, which holds the whole node.

The export uses the node's libhwloc (installed with MPICH or Open MPI) through ctypes; on a
node without it nothing is exported and the ranks discover the topology themselves, as
before.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import threading
from collections.abc import Mapping
from pathlib import Path

log = logging.getLogger("fuzzball.substrate")

#: where a multinode part's container finds the node's topology (a read-only bind)
TOPOLOGY_DIR = "/.fuzzball-topology"
#: the exported file's name, on the node and in the container
TOPOLOGY_FILE = "topology.xml"
#: Variables with which a job chooses where hwloc takes the topology from itself; a job
#: that sets any of them gets none of Substrate's.
SOURCE_VARIABLES = frozenset(
    {"HWLOC_XMLFILE", "HWLOC_SYNTHETIC", "HWLOC_COMPONENTS", "HWLOC_FSROOT", "HWLOC_CPUID_PATH"}
)

# hwloc's constants (hwloc.h, hwloc/export.h, hwloc 2.x)
_FLAG_INCLUDE_DISALLOWED = 1 << 0
_FILTER_KEEP_IMPORTANT = 3
#: XML that hwloc 1.x reads too (2.x reads both): an image may carry an older hwloc than
#: the node's, and a file it cannot parse would fail the ranks' MPI_Init
_EXPORT_XML_FLAG_V1 = 1 << 0
_API_2 = 0x20000

_exported: dict[Path, Path | None] = {}
_export_lock = threading.Lock()


def node_topology(directory: Path) -> Path | None:
    """The node's topology as an hwloc XML file in ``directory``, exported by the first call
    of this process (later ones return the same file); None where libhwloc 2.x is not
    installed or the export failed (said in the log once). Blocks for the discovery on the
    first call: run it off the event loop."""
    with _export_lock:
        if directory not in _exported:
            _exported[directory] = _export(directory)
        return _exported[directory]


def exported(directory: Path) -> bool:
    """Whether :func:`node_topology` already answered for ``directory`` in this process: it
    then returns at once, and can be called on the event loop."""
    # the entry is stored once, after the export finished: present means final
    return directory in _exported


def _export(directory: Path) -> Path | None:
    name = ctypes.util.find_library("hwloc")
    if name is None:
        log.info("no libhwloc on this node: multinode jobs' ranks discover its topology")
        return None
    try:
        hwloc = ctypes.CDLL(name)
        if hwloc.hwloc_get_api_version() < _API_2:
            log.info("libhwloc on this node is older than 2.0: no topology is exported")
            return None
        directory.mkdir(parents=True, exist_ok=True)
        target = directory / TOPOLOGY_FILE
        # written aside and moved into place: a container started meanwhile by another
        # agent process on the same state folder never reads half a file
        partial = directory / f".{TOPOLOGY_FILE}.{os.getpid()}"
        _write_xml(hwloc, partial)
        partial.chmod(0o644)
        partial.replace(target)
        return target
    except (OSError, AttributeError) as exc:
        log.warning("the node's topology could not be exported: %s", exc)
        return None


def _write_xml(hwloc: ctypes.CDLL, path: Path) -> None:
    """Discover the whole node (every CPU, even those outside this process's cpuset, and
    the I/O devices lstopo shows) and export it to ``path``."""
    hwloc.hwloc_topology_init.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    for function in ("hwloc_topology_load", "hwloc_topology_destroy"):
        getattr(hwloc, function).argtypes = [ctypes.c_void_p]
    hwloc.hwloc_topology_set_flags.argtypes = [ctypes.c_void_p, ctypes.c_ulong]
    hwloc.hwloc_topology_set_io_types_filter.argtypes = [ctypes.c_void_p, ctypes.c_int]
    hwloc.hwloc_topology_export_xml.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_ulong]
    topology = ctypes.c_void_p()
    if hwloc.hwloc_topology_init(ctypes.byref(topology)) != 0:
        raise OSError("hwloc_topology_init failed")
    try:
        if hwloc.hwloc_topology_set_flags(topology, _FLAG_INCLUDE_DISALLOWED) != 0:
            raise OSError("hwloc_topology_set_flags failed")
        if hwloc.hwloc_topology_set_io_types_filter(topology, _FILTER_KEEP_IMPORTANT) != 0:
            raise OSError("hwloc_topology_set_io_types_filter failed")
        if hwloc.hwloc_topology_load(topology) != 0:
            raise OSError("hwloc_topology_load failed")
        flags = _EXPORT_XML_FLAG_V1
        if hwloc.hwloc_topology_export_xml(topology, os.fsencode(path), flags) != 0:
            raise OSError(f"hwloc could not write {path}")
    finally:
        hwloc.hwloc_topology_destroy(topology)


def environment(container_env: Mapping[str, str]) -> dict[str, str]:
    """The variables pointing hwloc at the bound topology, for a container whose
    environment so far (the image's and the job's) is ``container_env``: none when it
    chooses hwloc's source itself, and without those it sets already (its own win)."""
    if SOURCE_VARIABLES & container_env.keys():
        return {}
    wanted = {
        "HWLOC_XMLFILE": f"{TOPOLOGY_DIR}/{TOPOLOGY_FILE}",
        "HWLOC_THISSYSTEM": "1",
        "HWLOC_THISSYSTEM_ALLOWED_RESOURCES": "1",
    }
    return {name: value for name, value in wanted.items() if name not in container_env}
