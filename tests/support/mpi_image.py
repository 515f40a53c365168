"""An MPI test image: ``tests/fixtures/mpi/ring.c`` built with this machine's MPICH, the
shared libraries it and UCX's transports load (found with ``ldd``), and busybox for
``/bin/sh``, pushed to a local registry. Used by the multinode tests and ``bench/mpi.py``."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from support.oci_pusher import Entry, Pusher, busybox_entries, directory, file, layer, symlink

RING_SOURCE = Path(__file__).resolve().parents[1] / "fixtures" / "mpi" / "ring.c"
#: UCX (MPICH's transport here) loads its transports from this folder at run time
UCX_MODULES = Path("/usr/lib/x86_64-linux-gnu/ucx")


def _library_closure(program: Path) -> list[Path]:
    """Every shared object ``program`` and the UCX modules load, the dynamic loader too."""
    modules = sorted(UCX_MODULES.glob("*.so*")) if UCX_MODULES.is_dir() else []
    found: set[Path] = set(modules)
    for path in [program, *modules]:
        listing = subprocess.run(["ldd", str(path)], capture_output=True, text=True).stdout
        found.update(Path(m) for m in re.findall(r"(/\S+) \(0x", listing))
    return sorted(found)


def _merged_usr_entries(paths: list[Path]) -> list[Entry]:
    """``paths`` laid out as on this merged-/usr machine: each file's content under its own
    name (the soname the loader asks for) in its folder's real location, and /lib, /lib64
    linking into /usr as here."""
    entries: dict[str, Entry] = {}
    for path in paths:
        folder = path.parent.resolve().relative_to("/")
        for parent in [*reversed(folder.parents[:-1]), folder]:
            entries.setdefault(str(parent), directory(str(parent)))
        target = str(folder / path.name)
        entries.setdefault(target, file(target, path.resolve().read_bytes(), mode=0o755))
    for link in ("lib", "lib64"):
        if Path("/", link).is_symlink():
            entries[link] = symlink(link, str(Path("/", link).readlink()))
    return list(entries.values())


def build_ring(out_dir: Path) -> Path | None:
    """``ring.c`` compiled with ``mpicc`` into ``out_dir``; None when MPICH is missing."""
    if shutil.which("mpicc") is None:
        return None
    program = out_dir / "ring"
    subprocess.run(["mpicc", "-O2", "-o", str(program), str(RING_SOURCE)], check=True)
    return program


def push_ring_image(registry_url: str, program: Path) -> str:
    """Push ``library/mpi-ring:latest`` holding ``/opt/ring``; its ``docker://`` URI."""
    libraries = _merged_usr_entries(_library_closure(program))
    ring = [directory("opt"), file("opt/ring", program.read_bytes(), mode=0o755)]
    pusher = Pusher(registry_url)
    try:
        pusher.push_image(
            "library/mpi-ring",
            "latest",
            [layer(busybox_entries()), layer(libraries), layer(ring)],
        )
    finally:
        pusher.close()
    return "docker://mpi-ring:latest"


#: what the ring prints on two nodes of two ranks each, sorted
RING_OUTPUT = [
    "rank 0 of 4 on ring-0 sum 10",
    "rank 1 of 4 on ring-0 sum 10",
    "rank 2 of 4 on ring-1 sum 10",
    "rank 3 of 4 on ring-1 sum 10",
]


def mpi_workflow(image: str, command: str, *, procs_per_node: int = 2) -> str:
    """A workflow of one job ``ring`` running ``command`` (a YAML list) on two nodes."""
    # Both "nodes" are this one machine: UCX sees the same boot id in both containers and
    # would reach across them through shared memory, which their separate IPC and mount
    # namespaces keep apart; between real nodes it picks the network itself.
    return f"""
version: v4
jobs:
  ring:
    image: {{uri: "{image}"}}
    command: {command}
    env: ["UCX_TLS=tcp,self"]
    resource: {{cpu: {{cores: 2}}, memory: {{size: 256MiB}}}}
    multinode: {{nodes: 2, procs-per-node: {procs_per_node}, implementation: mpich}}
    policy: {{timeout: {{execute: 2m}}}}
"""
