"""The harness of the hollow-node benchmarks (bench/hollow.py, bench/restart.py).

One ``fuzzball-orchestrate serve`` process on a fresh PostgreSQL database of its own, a local
``docker-registry`` holding the image the jobs name, an admin token for the REST gateway, and
fleets of hollow nodes (tests/support/hollow.py) in a few child processes. Needs root (to
make the database with ``su postgres``) and Debian's postgresql and docker-registry.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tests/support

from support.cluster import (
    NODE_TOKEN,
    ORCHESTRATE_MAIN,
    REPO_ROOT,
    LocalRegistry,
    OrchestrateProcess,
    cluster_config,
    free_port,
    write_config,
)
from support.hollow import FleetCounters, HollowStats, fleet_process

from fuzzball_core.config import NodeKeepaliveConfig

#: the hollow nodes' jobs: zero-length (the node reports exit 0 on assignment)
ARRAY = """
version: v1
jobs:
  zero:
    image: {{uri: docker://alpine:latest}}
    command: [/bin/true]
    resource: {{cpu: {{cores: 1}}, memory: {{size: 64MB}}}}
    task-array: {{start: 1, end: {tasks}}}
"""


#: where Orchestrate keeps its compiled bytecode between starts, as an installed one has it
#: (pip compiles on install): without it, every start of a checkout run with
#: PYTHONDONTWRITEBYTECODE compiles its sources again (a sixth of an empty start's CPU)
PYCACHE = Path(tempfile.gettempdir()) / "fuzzball-bench-pycache"


def spy(
    pid: int, directory: str | None, name: str, *, gil: bool = False
) -> subprocess.Popen[bytes] | None:
    """py-spy recording process ``pid`` into DIRECTORY/NAME.txt (raw collapsed stacks, each
    under its thread: the engine's loop, the REST gateway's, their workers) until
    :func:`unspy`, or None when not profiling. ``gil``: only the samples of the thread holding
    the GIL (where the CPU of Python goes, not where threads wait)."""
    if directory is None:
        return None
    Path(directory).mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [
            "py-spy",
            "record",
            "--pid",
            str(pid),
            "--format",
            "raw",
            "--rate",
            "50",
            "--output",
            f"{directory}/{name}.txt",
            "--nonblocking",
            "--threads",
            *(["--gil"] if gil else []),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def unspy(recorder: subprocess.Popen[bytes] | None) -> None:
    """Stop a :func:`spy` recording (it writes its file as it ends)."""
    if recorder is not None:
        recorder.send_signal(signal.SIGINT)
        recorder.wait(30)


def fresh_database(name: str) -> str:
    """An empty PostgreSQL database ``name`` (dropped first if it exists); its URL."""
    subprocess.run(
        ["bash", str(REPO_ROOT / "scripts/start-postgres.sh")], check=True, capture_output=True
    )
    for command in (f"dropdb --if-exists --force {name}", f"createdb -O fuzzball {name}"):
        subprocess.run(["su", "postgres", "-c", command], check=True, capture_output=True)
    return f"postgresql://fuzzball:fuzzball@127.0.0.1:5432/{name}"


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process, from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    """The running child processes of ``pid`` (one gone meanwhile is left out)."""
    try:
        listed = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    return [int(child) for child in listed if Path(f"/proc/{child}/stat").exists()]


def rss_bytes(pid: int) -> int:
    """Resident memory of a process, from /proc/PID/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def p99(samples: list[float]) -> float:
    """The 99th percentile (nearest rank) of ``samples``."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] if ordered else float("nan")


def keepalive_option(text: str | None) -> NodeKeepaliveConfig:
    """A benchmark's ``--keepalive INTERVAL,TIMEOUT`` (seconds) as ``orchestrate.node-keepalive``;
    the configuration's default without one."""
    if not text:
        return NodeKeepaliveConfig()
    interval, timeout = (float(part) for part in text.split(","))
    return NodeKeepaliveConfig(interval=interval, timeout=timeout)


#: the help of ``--keepalive``
KEEPALIVE_HELP = (
    "orchestrate.node-keepalive as INTERVAL,TIMEOUT seconds (default: the configuration's;"
    " 7200,20 is gRPC's own server default: no pings in practice)"
)


@dataclass
class Fleet:
    """One child process running hollow nodes."""

    process: multiprocessing.process.BaseProcess
    counters: FleetCounters
    size: int


class HollowCluster:
    """Orchestrate on PostgreSQL plus fleets of hollow nodes; stop with :meth:`close`."""

    def __init__(
        self,
        database: str | None = None,
        lease: float = 15.0,
        *,
        host: str = "127.0.0.1",
        keepalive: NodeKeepaliveConfig | None = None,
    ) -> None:
        """Orchestrate listens on ``host`` (loopback unless fleets run in network namespaces
        of their own); ``keepalive``: its ``orchestrate.node-keepalive`` and the fleets'
        pings (default: the configuration's default)."""
        # a database of this process's own by default: two benches at once each keep theirs
        self.database = database or f"fuzzball_hollow_{os.getpid()}"
        self.directory = Path(tempfile.mkdtemp(prefix="fuzzball-hollow-"))
        self.registry = LocalRegistry(self.directory / "registry")
        self.grpc_port = free_port()
        self.keepalive = keepalive or NodeKeepaliveConfig()
        config = cluster_config(
            self.directory,
            self.registry.url,
            grpc_port=self.grpc_port,
            lease=lease,
            host=host,
            orchestrate={"node-keepalive": self.keepalive.model_dump(by_alias=True)},
        )
        self.grpc_address = f"{host}:{self.grpc_port}"
        config["database"]["url"] = fresh_database(self.database)
        self.lease = lease
        self.config = config
        self.config_path = write_config(self.directory / "orchestrate.yaml", config)
        self.rest_url = f"http://{config['orchestrate']['rest-listen']}"
        self.token = self._orchestrate_command("create-account", "bench", "--admin").strip()
        self.orchestrate = OrchestrateProcess(self.config_path, self.directory / "orchestrate.log")
        self.http = httpx.Client(
            base_url=f"{self.rest_url}/v3",
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=120,
        )
        self.fleets: list[Fleet] = []
        self._context = multiprocessing.get_context("spawn")
        self._stop = self._context.Event()

    def _orchestrate_command(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", ORCHESTRATE_MAIN, "--config", str(self.config_path), *args],
            capture_output=True,
            text=True,
            check=True,
            cwd=REPO_ROOT,
        )
        return done.stdout

    # -- Orchestrate ---------------------------------------------------------------------------

    def set_lease(self, seconds: float) -> None:
        """The nodes' lease from Orchestrate's next start on (nodes learn it as they
        register)."""
        self.lease = seconds
        self.set_orchestrate("node-lease", seconds)

    def set_orchestrate(self, key: str, value: object) -> None:
        """Orchestrate's setting ``orchestrate.KEY`` from its next start on."""
        self.config["orchestrate"][key] = value
        write_config(self.config_path, self.config)

    def start(self, timeout: float = 120.0, started: Callable[[int], None] | None = None) -> float:
        """Start Orchestrate; seconds until its REST gateway answers ``/readyz`` and a
        ``node list``. ``started`` is called with its pid as soon as it runs."""
        began = time.monotonic()
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        os.environ["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
        self.orchestrate.start()
        if started is not None:
            started(self.pid)
        deadline = began + timeout
        while time.monotonic() < deadline:
            assert self.orchestrate.process is not None
            if self.orchestrate.process.poll() is not None:
                raise RuntimeError(f"Orchestrate exited; see {self.orchestrate.log_path}")
            try:
                if httpx.get(f"{self.rest_url}/readyz", timeout=1).status_code == 200:
                    self.http.get("/nodes").raise_for_status()
                    return time.monotonic() - began
            except httpx.HTTPError:
                pass
            time.sleep(0.02)
        raise RuntimeError(f"Orchestrate not ready in {timeout}s; see {self.orchestrate.log_path}")

    @property
    def pid(self) -> int:
        assert self.orchestrate.process is not None
        return self.orchestrate.process.pid

    def cpu(self) -> float:
        """Orchestrate's CPU seconds so far, with its child processes' (the REST list
        worker's)."""
        return cpu_seconds(self.pid) + sum(cpu_seconds(child) for child in children(self.pid))

    def fleet_cpu(self) -> float:
        """The hollow fleets' processes' CPU seconds so far, together: on two cores they
        compete with Orchestrate, so a benchmark reports both."""
        return sum(cpu_seconds(fleet.process.pid) for fleet in self.fleets if fleet.process.pid)

    def database_cpu(self) -> float:
        """CPU seconds so far of the PostgreSQL backends serving this cluster's database
        (Orchestrate's connections; the server's own processes, such as its WAL writer, are
        not counted): on two cores they compete with Orchestrate too."""
        total = 0.0
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                # a backend's title names its user and database, after the cluster's name
                # where it has one: "postgres: 15/main: fuzzball DATABASE 127.0.0.1(...) ..."
                title = (entry / "cmdline").read_bytes().split(b"\0")[0].split()
                if title[0] == b"postgres:" and self.database.encode() in title[1:4]:
                    total += cpu_seconds(int(entry.name))
            except (OSError, IndexError):
                continue
        return total

    def engine_passes(self) -> tuple[int, float]:
        """The engine's passes that committed so far, and the seconds they took in all
        (Orchestrate's ``fuzzball_engine_pass_seconds``)."""
        reply = httpx.get(
            f"{self.rest_url}/v4/metrics",
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=60,
        )
        reply.raise_for_status()
        found = {}
        for line in reply.text.splitlines():
            name, _, value = line.partition(" ")
            if name in ("fuzzball_engine_pass_seconds_count", "fuzzball_engine_pass_seconds_sum"):
                found[name] = float(value)
        return (
            int(found["fuzzball_engine_pass_seconds_count"]),
            found["fuzzball_engine_pass_seconds_sum"],
        )

    def submit(self, specification: str, name: str = "hollow") -> str:
        reply = self.http.post("/workflows", json={"rawSpecification": specification, "name": name})
        reply.raise_for_status()
        return str(reply.json()["id"])

    def status(self, workflow_id: str) -> str:
        reply = self.http.get(f"/workflows/{workflow_id}:status")
        reply.raise_for_status()
        return str(reply.json().get("workflowStatus", "STAGE_STATUS_UNSPECIFIED"))

    def tasks_finished(self, workflow_id: str) -> int:
        """Tasks of the workflow's arrays that finished."""
        reply = self.http.get(f"/workflows/{workflow_id}:status")
        reply.raise_for_status()
        stages = reply.json().get("status", {}).get("stages", [])
        return sum(int(s.get("details", {}).get("tasksFinished", 0)) for s in stages)

    def wait(self, workflow_id: str, timeout: float = 600.0, poll: float = 0.05) -> str:
        """Poll until the workflow ended; its status."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.status(workflow_id)
            if status.endswith(("FINISHED", "FAILED", "CANCELED")):
                return status
            time.sleep(poll)
        raise TimeoutError(f"workflow {workflow_id} did not end in {timeout}s")

    def timed_get(self, path: str) -> float:
        """Seconds one GET of ``path`` took (it must succeed)."""
        began = time.perf_counter()
        self.http.get(path).raise_for_status()
        return time.perf_counter() - began

    # -- hollow nodes --------------------------------------------------------------------------

    def add_nodes(
        self, count: int, *, per_process: int = 1250, namespace: str = "", **node_options: Any
    ) -> None:
        """Start ``count`` more hollow nodes, ``per_process`` to a child process, in network
        namespace ``namespace`` if one is named (``node_options``: as
        :func:`~support.hollow.fleet_process` takes them)."""
        node_options.setdefault("keepalive", self.keepalive)
        first = sum(f.size for f in self.fleets)
        for start in range(first, first + count, per_process):
            names = [
                f"hollow-{i:05d}" for i in range(start, min(start + per_process, first + count))
            ]
            counters = FleetCounters()
            process = self._context.Process(
                target=fleet_process,
                args=(
                    self.grpc_address,
                    NODE_TOKEN,
                    names,
                    counters,
                    self._stop,
                    node_options,
                    namespace,
                ),
                daemon=True,
            )
            process.start()
            self.fleets.append(Fleet(process, counters, len(names)))

    def stats(self) -> HollowStats:
        """The fleets' counters, summed."""
        total = HollowStats()
        for fleet in self.fleets:
            stats = fleet.counters.read()
            for name in FleetCounters.FIELDS:
                setattr(total, name, getattr(total, name) + getattr(stats, name))
            total.last_welcome = max(total.last_welcome, stats.last_welcome)
        return total

    def wait_welcomed(self, count: int, timeout: float = 300.0) -> float:
        """Wait until ``count`` streams in all were welcomed; the seconds it took."""
        began = time.monotonic()
        while self.stats().welcomed < count:
            if time.monotonic() - began > timeout:
                raise TimeoutError(f"{self.stats().welcomed}/{count} nodes welcomed in {timeout}s")
            time.sleep(0.1)
        return time.monotonic() - began

    @property
    def nodes(self) -> int:
        return sum(f.size for f in self.fleets)

    def close(self) -> None:
        self._stop.set()
        for fleet in self.fleets:
            fleet.process.join(15)
            if fleet.process.is_alive():
                fleet.process.kill()
        self.orchestrate.stop()
        self.registry.stop()
        self.http.close()
        subprocess.run(
            ["su", "postgres", "-c", f"dropdb --if-exists --force {self.database}"],
            check=False,
            capture_output=True,
        )


def median(samples: list[float]) -> float:
    return statistics.median(samples) if samples else float("nan")
