"""Multinode MPI benchmark: 2-node x 2-rank MPICH and Open MPI jobs through the whole system,
each against its own launcher in the same run.

Prints, from one run, for each implementation:
(a) the median time from submission to FINISHED (the time Orchestrate records it) of
    ``tests/fixtures/mpi/ring.c`` (MPI_Init, an Allreduce, a barrier) built with it, on two
    Substrate agents each in its own network namespace (``tests/support/netns_cluster.py``:
    real interfaces), image cached: scheduling, both nodes' containers and the wire-up
    (MPICH: each node's PMI-1 service, barriers relayed through Orchestrate; Open MPI:
    mpirun in the first node's container starting orted in the second's through Substrate);
(b) the same program's median under that implementation's own launcher on this machine
    (MPICH: ``mpiexec.mpich -n 4``, Hydra; Open MPI: ``mpirun.openmpi -np 4``), ranks as
    plain processes over TCP (the transport the containers use between nodes), measured in
    alternate rounds with (a) so that both see the same load, and over shared memory;
(b') the same launcher with two ranks on each of two "hosts", network namespaces of this
    machine joined by a bridge as the agents' are (its ssh launcher replaced by ``nsenter``
    into each host's namespace), in the same rounds: how much of (a)'s gap the two nodes
    alone explain, since the issue's peer (b) runs all four ranks on one host;
(c) the ratio of (a) to the TCP figure, and the CPU time each spends per run: Orchestrate
    (this process), the agents and the containers' processes (the agents' reaped children),
    against the launcher with its ranks (this process's reaped children);
(e) the image mounts each node made per run (0 once the image's mount is kept between runs);
(d) where (a)'s time goes, as medians of the steps between what Orchestrate sees on its node
    API: the job's assignments sent (submission, image stage, placement), both parts'
    containers started, the last fence relayed (MPICH: ranks up and their PMI barriers done;
    Open MPI: mpirun asked for its daemons), the last part's exit reported, FINISHED.

Needs root, MPICH (``mpicc.mpich``, ``mpiexec.mpich``) and/or Open MPI (``mpicc.openmpi``,
``mpirun.openmpi``), Debian's docker-registry and busybox-static. An implementation that is
not installed is skipped, saying so.
Usage: python bench/mpi.py [--runs 7] [--only mpich|openmpi]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import resource
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tests/support

from support.cluster import Cluster, LocalRegistry, have_prerequisites
from support.mpi_image import build_ring, push_ring_image
from support.netns_cluster import ClusterNetwork, NetnsCluster

WORKFLOW = """
version: v4
jobs:
  ring:
    image: {{uri: "{image}"}}
    command: [/opt/ring]
    env: [{env}]
    multinode: {{nodes: 2, procs-per-node: 2, implementation: {implementation}}}
"""

#: the steps of a run's breakdown, each ending at the checkpoint of the same name
STEPS = (
    ("assigned", "submission, image stage, placement: both assignments sent"),
    ("started", "both parts' containers started (reported)"),
    ("wired", "last fence relayed (MPICH: ranks up, PMI barriers; Open MPI: mpirun asked)"),
    ("exited", "MPI work until the last part's exit is reported"),
    ("finished", "FINISHED recorded"),
)


@dataclass(frozen=True)
class Implementation:
    """One MPI implementation: its name in workflows, its launcher and how each transport is
    chosen (environment variables, passed through ``env``)."""

    name: str
    launcher: list[str]
    #: the job's env in Fuzzball (what the containers on one machine need)
    job_env: str
    tcp_env: tuple[str, ...]
    shared_memory_env: tuple[str, ...]
    #: the launcher's own environment here, beyond this process's
    launcher_env: tuple[tuple[str, str], ...] = ()
    #: the launcher with two ranks on each of two hosts (:class:`TwoHosts` fills in
    #: ``{hosts}``, ``{launcher}``, ``{uplink}``, ``{subnet}``)
    two_hosts: tuple[str, ...] = ()


IMPLEMENTATIONS = [
    # both "nodes" are this machine: UCX would reach across the containers through shared
    # memory, which their namespaces keep apart; between real nodes it picks the network
    Implementation(
        "mpich",
        ["mpiexec.mpich", "-n", "4"],
        '"UCX_TLS=tcp,self"',
        ("UCX_TLS=tcp,self",),
        (),
        two_hosts=(
            "mpiexec.mpich",
            "-hosts",
            "{hosts}",
            "-ppn",
            "2",
            "-n",
            "4",
            "-launcher",
            "ssh",
            "-launcher-exec",
            "{launcher}",
            # the proxies reach mpiexec at this machine's end of the bridge
            "-iface",
            "{uplink}",
        ),
    ),
    Implementation(
        "openmpi",
        ["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "-np", "4"],
        '"PATH=/usr/bin:/bin"',
        ("OMPI_MCA_btl=tcp,self",),
        ("OMPI_MCA_btl=vader,self",),
        # this machine has libmunge: PMIx would try munged's socket with growing pauses
        # (2 s in all) before its native authentication; the containers have no munge
        (("PMIX_MCA_psec", "native"),),
    ),
]


class NodeTraffic:
    """What crosses the node API of the in-process Orchestrate, with the time it did: every
    message from a node (``node_message``) and every message to one (``NodeHub.send``).
    The bound methods are wrapped on these two objects only; Orchestrate runs unchanged."""

    def __init__(self, orchestrate: Any) -> None:
        #: (time, direction "in"/"out", node id, message kind, run id)
        self.seen: list[tuple[float, str, str, str, int]] = []
        engine, hub = orchestrate.engine, orchestrate.hub
        engine.node_message = self._recording("in", engine.node_message)
        hub.send = self._recording("out", hub.send)

    def _recording(self, direction: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def recorded(node_id: str, message: Any) -> Any:
            kind = message.WhichOneof("kind")
            run_id = getattr(getattr(message, kind), "run_id", 0) if kind else 0
            self.seen.append((time.time(), direction, node_id, kind or "", run_id))
            return call(node_id, message)

        return recorded

    def since(self, began: float) -> list[tuple[float, str, str, str, int]]:
        return [entry for entry in list(self.seen) if entry[0] >= began]


@dataclass
class Sample:
    """One run through Fuzzball: seconds to FINISHED, its checkpoints and CPU seconds."""

    seconds: float
    checkpoints: dict[str, float]
    cpu: dict[str, float] = field(default_factory=dict)
    #: image mounts each node made during the run (:class:`ImageMounts`)
    mounts: list[int] = field(default_factory=list)


#: inotify's flags (linux/inotify.h): an entry made in the watched folder; the entry is a
#: directory
IN_CREATE = 0x00000100
IN_ISDIR = 0x40000000
#: struct inotify_event's fixed part: wd, mask, cookie, len
INOTIFY_EVENT = struct.Struct("iIII")


class ImageMounts:
    """Counts the image mounts each node makes, through inotify on the nodes' image folders:
    the runtime makes an image's mount point (``runtime/images/<key>``) before mounting it
    and removes it after the unmount, so each directory made there, less the ``.refs``
    ones, is one mount (a node that remounts the image every run shows one per run). The
    folders must exist: watch after a run that used both nodes."""

    def __init__(self, cluster: Cluster) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self._fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self._fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self._node_of: dict[int, int] = {}
        try:
            for index in range(len(cluster.agents)):
                folder = cluster.directory / f"node-{index + 1}" / "runtime" / "images"
                watch = libc.inotify_add_watch(self._fd, os.fsencode(folder), IN_CREATE)
                if watch < 0:
                    raise OSError(ctypes.get_errno(), "inotify_add_watch", str(folder))
                self._node_of[watch] = index
        except BaseException:
            os.close(self._fd)
            raise

    def take(self) -> list[int]:
        """Mounts per node (in the cluster's order) since the last call."""
        counts = [0] * len(self._node_of)
        while True:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                return counts
            offset = 0
            while offset < len(data):
                watch, mask, _cookie, length = INOTIFY_EVENT.unpack_from(data, offset)
                start = offset + INOTIFY_EVENT.size
                name = data[start : start + length].rstrip(b"\0")
                offset = start + length
                if mask & IN_ISDIR and not name.endswith(b".refs"):
                    counts[self._node_of[watch]] += 1

    def close(self) -> None:
        """Stop watching."""
        os.close(self._fd)


def checkpoints(
    traffic: list[tuple[float, str, str, str, int]], began: float, finished: float
) -> dict[str, float]:
    """Seconds from submission to each step's end (:data:`STEPS`) for the multinode run: the
    run whose assignment went to two nodes."""
    assigned: dict[int, list[float]] = {}
    for moment, direction, _node, kind, run_id in traffic:
        if direction == "out" and kind == "assign":
            assigned.setdefault(run_id, []).append(moment)
    run_id = next(run for run, times in assigned.items() if len(times) > 1)

    def last(direction: str, kind: str) -> float:
        times = [t for t, d, _n, k, r in traffic if d == direction and k == kind and r == run_id]
        return max(times) if times else float("nan")

    points = {
        "assigned": max(assigned[run_id]),
        "started": last("in", "started"),
        "wired": last("out", "fence_done"),
        "exited": last("in", "exited"),
        "finished": finished,
    }
    return {name: moment - began for name, moment in points.items()}


def process_cpu(pid: int) -> tuple[float, float]:
    """(own, reaped children's) CPU seconds of a process, from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    ticks = os.sysconf("SC_CLK_TCK")
    own = (int(fields[11]) + int(fields[12])) / ticks
    children = (int(fields[13]) + int(fields[14])) / ticks
    return own, children


def fuzzball_cpu(cluster: Cluster) -> dict[str, float]:
    """CPU seconds so far: Orchestrate (this process), the agents, their containers."""
    agents = [process_cpu(agent.process.pid) for agent in cluster.agents]
    return {
        "orchestrate": time.process_time(),
        "agents": sum(own for own, _ in agents),
        "containers": sum(children for _, children in agents),
    }


class ThroughFuzzball:
    """Runs of the 2x2 ring through Fuzzball on one cluster."""

    def __init__(self, cluster: Cluster, image: str, mpi: Implementation) -> None:
        self.cluster = cluster
        self.specification = WORKFLOW.format(image=image, env=mpi.job_env, implementation=mpi.name)
        self.traffic = NodeTraffic(cluster.orchestrate.orchestrate)

    def run(self, mounts: ImageMounts | None = None) -> Sample:
        """One run, from submission to FINISHED as Orchestrate records it (and the image
        mounts each node made by the time it was seen, where ``mounts`` counts them)."""
        orchestrate = self.cluster.orchestrate
        cpu_before = fuzzball_cpu(self.cluster)
        began = time.time()
        workflow_id = orchestrate.start_workflow(self.specification)
        view = orchestrate.wait_for(workflow_id, timeout=120)
        cpu_after = fuzzball_cpu(self.cluster)
        assert view.status == "FINISHED", [(s.name, s.message) for s in view.stages]
        finished = next(
            e.time for e in orchestrate.events(workflow_id) if e.kind == "workflow_finished"
        )
        return Sample(
            finished - began,
            checkpoints(self.traffic.since(began), began, finished),
            {part: cpu_after[part] - cpu_before[part] for part in cpu_after},
            mounts.take() if mounts is not None else [],
        )


#: What the launchers ask of ``ssh`` (``[OPTIONS] HOST COMMAND...``), done by entering the
#: host's network namespace instead (``{cases}``: one ``ADDRESS) namespace=NAME ;;`` each).
NAMESPACE_LAUNCHER = """\
#!/bin/sh
while [ "${{1#-}}" != "$1" ]; do shift; done
host=$1
shift
case "$host" in
{cases}
*) echo "no namespace for host $host" >&2; exit 1 ;;
esac
exec nsenter --net="/run/netns/$namespace" /bin/sh -c "$*"
"""


class TwoHosts:
    """Two "hosts" for the launcher: network namespaces joined by a bridge, each with its
    own address, as the agents' (:class:`~support.netns_cluster.ClusterNetwork`), and a
    stand-in for ``ssh`` that starts the launcher's proxies in them."""

    def __init__(self, directory: Path) -> None:
        self.network = ClusterNetwork(2)
        try:
            cases = "\n".join(
                f"{address}) namespace={namespace} ;;"
                for address, namespace in zip(
                    self.network.addresses, self.network.namespaces, strict=True
                )
            )
            self.launcher = directory / "netns-ssh"
            self.launcher.write_text(NAMESPACE_LAUNCHER.format(cases=cases))
            self.launcher.chmod(0o755)
        except BaseException:
            self.network.remove()
            raise

    def command(self, mpi: Implementation) -> list[str]:
        """``mpi``'s launcher spreading its ranks over the two hosts."""
        fields = {
            "hosts": ",".join(self.network.addresses),
            "launcher": str(self.launcher),
            "uplink": self.network.uplink,
            "subnet": str(self.network.subnet),
        }
        return [argument.format(**fields) for argument in mpi.two_hosts]

    def remove(self) -> None:
        """Delete the namespaces and the bridge."""
        self.network.remove()


def through_launcher(
    program: Path, mpi: Implementation, env: Sequence[str], launcher: Sequence[str] = ()
) -> tuple[float, float]:
    """Seconds and CPU seconds (the launcher and its ranks) of one run of the implementation's
    own launcher starting 4 ranks (``launcher``: the command; its one-host one by default;
    Hydra ends MPICH's ring on one host with a bad-termination notice because it skips
    MPI_Finalize; the time to get there is what is compared)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    subprocess.run(
        [*(launcher or mpi.launcher), "env", *env, str(program)],
        capture_output=True,
        timeout=60,
        check=False,
        env={**os.environ, **dict(mpi.launcher_env)},
    )
    seconds = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - usage.ru_utime + after.ru_stime - usage.ru_stime
    return seconds, cpu


def compare(
    cluster: Cluster,
    image: str,
    program: Path,
    mpi: Implementation,
    runs: int,
    two_hosts: TwoHosts | None,
) -> list[str]:
    """Alternate rounds (Fuzzball, launcher on TCP, launcher on two hosts where
    ``two_hosts`` and the implementation allow, launcher on shared memory) after one warm-up
    of each; the figures' lines."""
    spread = two_hosts.command(mpi) if two_hosts is not None and mpi.two_hosts else None
    ours = ThroughFuzzball(cluster, image, mpi)
    ours.run()
    through_launcher(program, mpi, mpi.tcp_env)
    if spread:
        through_launcher(program, mpi, mpi.tcp_env, spread)
    mounts = ImageMounts(cluster)
    samples: list[Sample] = []
    tcp: list[tuple[float, float]] = []
    apart: list[tuple[float, float]] = []
    shared: list[float] = []
    for _ in range(runs):
        samples.append(ours.run(mounts))
        tcp.append(through_launcher(program, mpi, mpi.tcp_env))
        if spread:
            apart.append(through_launcher(program, mpi, mpi.tcp_env, spread))
        shared.append(through_launcher(program, mpi, mpi.shared_memory_env)[0])
    mounts.close()
    fuzzball = statistics.median(s.seconds for s in samples)
    launcher_seconds = statistics.median(t for t, _ in tcp)
    launcher = " ".join(mpi.launcher[:1] + mpi.launcher[-2:])
    cpu = {part: statistics.median(s.cpu[part] for s in samples) for part in samples[0].cpu}
    lines = [
        f"{mpi.name}: 2x2 ring through Fuzzball (two agents, containers, TCP):"
        f" {fuzzball * 1000:.0f} ms (runs {', '.join(f'{s.seconds * 1000:.0f}' for s in samples)})",
        f"{mpi.name}: same program under {launcher} (TCP), same rounds:"
        f" {launcher_seconds * 1000:.0f} ms (runs {', '.join(f'{t * 1000:.0f}' for t, _ in tcp)})",
        f"{mpi.name}: same program under {launcher} (shared memory):"
        f" {statistics.median(shared) * 1000:.0f} ms",
        f"{mpi.name}: same program under {mpi.launcher[0]}, 2 ranks on each of two hosts"
        " (network namespaces, TCP), same rounds: "
        + (
            f"{statistics.median(t for t, _ in apart) * 1000:.0f} ms"
            f" (runs {', '.join(f'{t * 1000:.0f}' for t, _ in apart)});"
            f" Fuzzball {fuzzball / statistics.median(t for t, _ in apart):.2f}x it"
            if apart
            else "not measured for this implementation"
        ),
        f"{mpi.name}: ratio {fuzzball / launcher_seconds:.2f}x its own launcher's time on TCP"
        " (target <= 1.3x)",
        f"{mpi.name}: CPU per run: Fuzzball {sum(cpu.values()) * 1000:.0f} ms"
        f" (Orchestrate {cpu['orchestrate'] * 1000:.0f}, agents {cpu['agents'] * 1000:.0f},"
        f" containers {cpu['containers'] * 1000:.0f}) vs {launcher} and its ranks"
        f" {statistics.median(c for _, c in tcp) * 1000:.0f} ms",
        f"{mpi.name}: image mounts per run, node-1/node-2: "
        + ", ".join("/".join(str(n) for n in s.mounts) for s in samples),
        f"{mpi.name}: where Fuzzball's time goes (median ms of each step):",
    ]
    previous = {id(s): 0.0 for s in samples}
    for name, label in STEPS:
        steps = []
        for sample in samples:
            steps.append(sample.checkpoints[name] - previous[id(sample)])
            previous[id(sample)] = sample.checkpoints[name]
        lines.append(f"    {statistics.median(steps) * 1000:6.0f}  {label}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument(
        "--only", choices=[mpi.name for mpi in IMPLEMENTATIONS], help="one implementation"
    )
    args = parser.parse_args()
    missing = have_prerequisites()
    if missing is not None:
        sys.exit(missing)
    figures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="fuzzball-bench-mpi-") as scratch:
        directory = Path(scratch)
        programs = {}
        for mpi in IMPLEMENTATIONS:
            if args.only not in (None, mpi.name):
                continue
            program = build_ring(directory, mpi.name)
            if program is None or shutil.which(mpi.launcher[0]) is None:
                figures.append(f"{mpi.name}: not installed here, skipped")
            else:
                programs[mpi.name] = program
        if not programs:
            sys.exit("neither MPICH nor Open MPI is installed")
        registry = LocalRegistry(directory / "registry")
        cluster: NetnsCluster | None = None
        two_hosts: TwoHosts | None = None
        try:
            images = {
                name: push_ring_image(registry.url, program, name)
                for name, program in programs.items()
            }
            cluster = NetnsCluster(directory / "cluster", registry, agents=2, cores=2)
            assert cluster.cluster is not None
            two_hosts = TwoHosts(directory)
            for mpi in IMPLEMENTATIONS:
                if mpi.name in images:
                    figures += compare(
                        cluster.cluster,
                        images[mpi.name],
                        programs[mpi.name],
                        mpi,
                        args.runs,
                        two_hosts,
                    )
        finally:
            if two_hosts is not None:
                two_hosts.remove()
            if cluster is not None:
                cluster.close()
            registry.stop()
    figures.append(f"load average at the end: {os.getloadavg()[0]:.1f}")
    print("\n".join(figures))


if __name__ == "__main__":
    main()
