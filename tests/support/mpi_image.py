"""MPI test images: ``tests/fixtures/mpi/ring.c`` built with this machine's MPICH or Open MPI,
the shared libraries it loads (found with ``ldd``), and busybox for ``/bin/sh``, pushed to a
local registry. The MPICH image adds UCX's transports (MPICH's transport here); the Open MPI
image adds Open MPI itself (``mpirun``, ``orted``, its components, help texts and settings,
from Debian's packages) since its ranks are started by its own launcher inside the job's
containers. Used by the multinode tests and ``bench/mpi.py``."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from support.oci_pusher import Entry, Pusher, busybox_entries, directory, file, layer, symlink

RING_SOURCE = Path(__file__).resolve().parents[1] / "fixtures" / "mpi" / "ring.c"
#: a rendezvous with torchrun's variables, for generic multinode jobs
RENDEZVOUS_SOURCE = RING_SOURCE.with_name("rendezvous.c")
#: where the rendezvous image holds it
RENDEZVOUS_PROGRAM = "/opt/rendezvous"
#: UCX (MPICH's transport here) loads its transports from this folder at run time
UCX_MODULES = Path("/usr/lib/x86_64-linux-gnu/ucx")
#: Debian's packages of Open MPI's launcher, libraries, components and help texts
OPENMPI_PACKAGES = ("openmpi-bin", "openmpi-common", "libopenmpi3", "libpmix2")
#: each implementation's compiler driver (Debian's alternatives make plain ``mpicc`` whichever
#: was installed last, so each is named)
COMPILERS = {"mpich": "mpicc.mpich", "openmpi": "mpicc.openmpi"}


def _openmpi_files() -> list[Path]:
    """The files (and links to files) of :data:`OPENMPI_PACKAGES`, without documentation."""
    listing = subprocess.run(
        ["dpkg", "-L", *OPENMPI_PACKAGES], capture_output=True, text=True, check=True
    ).stdout
    paths = {Path(line) for line in listing.splitlines() if line.startswith("/")}
    skipped = ("/usr/share/doc/", "/usr/share/man/", "/usr/share/lintian/")
    return sorted(path for path in paths if path.is_file() and not str(path).startswith(skipped))


def _library_closure(program: Path, modules: list[Path]) -> list[Path]:
    """Every shared object ``program`` and ``modules`` load, the dynamic loader too."""
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


def build_ring(out_dir: Path, implementation: str = "mpich") -> Path | None:
    """``ring.c`` compiled into ``out_dir`` with ``implementation``'s compiler (``mpich``
    or ``openmpi``); None when that implementation is not installed."""
    compiler = COMPILERS[implementation]
    if shutil.which(compiler) is None:
        return None
    program = out_dir / f"ring-{implementation}"
    subprocess.run([compiler, "-O2", "-o", str(program), str(RING_SOURCE)], check=True)
    return program


def push_ring_image(registry_url: str, program: Path, implementation: str = "mpich") -> str:
    """Push ``library/mpi-ring:latest`` (``library/ompi-ring:latest`` for Open MPI) holding
    ``/opt/ring``; its ``docker://`` URI."""
    if implementation == "openmpi":
        own = _openmpi_files()
        modules = [path for path in own if ".so" in path.name]
        entries = _merged_usr_entries(sorted({*own, *_library_closure(program, modules)}))
        # Debian reaches mpirun through its alternatives; the image names it directly
        entries.append(symlink("usr/bin/mpirun", "orterun"))
        # PMIx looks up the user's home directory and crashes without one (as every real
        # image has)
        entries += [
            file("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n"),
            directory("root", mode=0o700),
        ]
        repository = "ompi-ring"
    else:
        modules = sorted(UCX_MODULES.glob("*.so*")) if UCX_MODULES.is_dir() else []
        entries = _merged_usr_entries(_library_closure(program, modules))
        repository = "mpi-ring"
    ring = [directory("opt"), file("opt/ring", program.read_bytes(), mode=0o755)]
    pusher = Pusher(registry_url)
    try:
        pusher.push_image(
            f"library/{repository}",
            "latest",
            [layer(busybox_entries()), layer(entries), layer(ring)],
        )
    finally:
        pusher.close()
    return f"docker://{repository}:latest"


def push_rendezvous_image(registry_url: str, out_dir: Path) -> str:
    """Push ``library/rendezvous:latest`` holding ``rendezvous.c`` built with ``cc`` at
    :data:`RENDEZVOUS_PROGRAM`; its ``docker://`` URI."""
    program = out_dir / "rendezvous"
    subprocess.run(["cc", "-O2", "-o", str(program), str(RENDEZVOUS_SOURCE)], check=True)
    libraries = _merged_usr_entries(_library_closure(program, []))
    opt = [directory("opt"), file(RENDEZVOUS_PROGRAM[1:], program.read_bytes(), mode=0o755)]
    pusher = Pusher(registry_url)
    try:
        pusher.push_image(
            "library/rendezvous",
            "latest",
            [layer(busybox_entries()), layer(libraries), layer(opt)],
        )
    finally:
        pusher.close()
    return "docker://rendezvous:latest"


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
