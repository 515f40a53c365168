"""A whole Fuzzball cluster on this machine for end-to-end tests and the e2e benchmark.

* :class:`LocalRegistry`: a real ``docker-registry`` on loopback holding a busybox-based
  ``library/alpine:latest``, used as the mirror of ``docker.io``, so the unmodified upstream
  examples (``docker://alpine:latest``) run without the internet.
* :class:`InProcessOrchestrate`: Orchestrate (``build`` + ``serve``) on an event loop in a
  background thread, SQLite in a temporary directory, gRPC on a free port; tests call its
  service layer through :meth:`InProcessOrchestrate.call`, which runs on that loop (the
  engine is single-threaded).
* :class:`OrchestrateProcess`: ``fuzzball-orchestrate serve`` as a child process, to be
  SIGKILLed and restarted.
* :class:`SubstrateProcess`: one ``fuzzball-substrate`` child process with its own work
  directory, node name and resource limits.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml

from fuzzball_core.api.following import LogQuery, read_all
from fuzzball_core.config import FuzzballConfig, parse_config
from fuzzball_core.orchestrate.server import Orchestrate, build, serve
from fuzzball_core.plugins import get_registry
from fuzzball_core.service.views import TERMINAL, WorkflowView
from fuzzball_runtime import sweep
from support.oci_pusher import Pusher, busybox_entries, file, layer
from support.ports import free_port
from support.registry_server import REGISTRY_BINARY, RegistryServer

T = TypeVar("T")

NODE_TOKEN = "e2e-node-token"
REPO_ROOT = Path(__file__).resolve().parents[2]
#: the upstream example, unmodified (a copy ships in examples/, see examples/NOTICE.md)
HELLO_WORLD = REPO_ROOT / "examples" / "hello-world.yaml"

ORCHESTRATE_MAIN = "from fuzzball_core.orchestrate.server import main; main()"
SUBSTRATE_MAIN = "from fuzzball_core.substrate.main import main; main()"


def have_prerequisites() -> str | None:
    """Why the end-to-end tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "end-to-end tests start containers and need root"
    if not Path(REGISTRY_BINARY).exists() or not Path("/bin/busybox").exists():
        return "end-to-end tests need Debian's docker-registry and busybox-static packages"
    return None


class LocalRegistry:
    """``docker-registry`` on loopback with ``library/alpine:latest`` (busybox inside)."""

    def __init__(self, workdir: Path) -> None:
        self.server = RegistryServer(workdir)
        self.server.start()
        pusher = Pusher(self.server.url)
        try:
            pusher.push_image(
                "library/alpine",
                "latest",
                [layer(busybox_entries()), layer([file("etc/alpine-release", b"3.99.0\n")])],
            )
        finally:
            pusher.close()

    @property
    def url(self) -> str:
        return self.server.url

    def stop(self) -> None:
        self.server.kill()


def cluster_config(
    directory: Path,
    registry_url: str,
    *,
    grpc_port: int,
    lease: float = 15.0,
    substrate: dict[str, Any] | None = None,
    rest_port: int | None = None,
    orchestrate: dict[str, Any] | None = None,
    images: dict[str, Any] | None = None,
    host: str = "127.0.0.1",
    tls: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The configuration mapping every process of one test cluster reads; Orchestrate
    listens on ``host`` (loopback unless the nodes are in network namespaces of their own).
    Plaintext (said so, as ``tls.plaintext``) unless ``tls`` names certificates."""
    tls = tls or {"plaintext": True}
    scheme = "http" if tls.get("plaintext") else "https"
    rest = f"{host}:{rest_port or free_port()}"
    return {
        "data-dir": str(directory / "data"),
        "database": {"url": f"sqlite:///{directory / 'orchestrate.db'}"},
        "orchestrate": {
            "grpc-listen": f"{host}:{grpc_port}",
            "rest-listen": rest,
            "node-token": NODE_TOKEN,
            "node-lease": lease,
            **(orchestrate or {}),
        },
        "substrate": {
            "orchestrate-address": f"{host}:{grpc_port}",
            "node-token": NODE_TOKEN,
            # several agents share this machine: each its own metrics port on loopback and no
            # bundled node_exporter (they would all want :9100); tests of either say so
            "metrics-listen": f"127.0.0.1:{free_port()}",
            "node-exporter-listen": "",
            **(substrate or {}),
        },
        "images": {
            "registries": {"docker.io": {"mirrors": [registry_url]}},
            "object-cache-url": f"{scheme}://{rest}",
            "object-cache-token": NODE_TOKEN,
            **(images or {}),
        },
        "tls": tls,
    }


def write_config(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def build_orchestrate(config: FuzzballConfig) -> Orchestrate:
    """Orchestrate with the configured scheduler driver (not serving yet)."""
    registry = get_registry()
    scheduler = registry.driver(
        "fuzzball.schedulers", config.scheduler.driver, config.scheduler.options
    )
    return build(config, scheduler, registry)


class InProcessOrchestrate:
    """Orchestrate serving on an event loop in a background thread of this process."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = parse_config(config)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.orchestrate = self.call(lambda: build_orchestrate(self.config))
        self._stop = self.call(asyncio.Event)
        self._serving = asyncio.run_coroutine_threadsafe(
            serve(self.orchestrate, self._stop), self.loop
        )
        self.admin = self.call(
            lambda: self.orchestrate.service.create_account("e2e-admin", admin=True)[0]
        )

    def call(self, function: Callable[[], T], timeout: float = 60.0) -> T:
        """Run ``function`` on Orchestrate's loop and return its result (or raise)."""

        async def invoke() -> T:
            return function()

        return asyncio.run_coroutine_threadsafe(invoke(), self.loop).result(timeout)

    @property
    def service(self) -> Any:
        return self.orchestrate.service

    @property
    def rest_url(self) -> str:
        """The REST gateway's root URL, for the ``fuzzball`` CLI."""
        scheme = "http" if self.config.tls.plaintext else "https"
        return f"{scheme}://{self.config.orchestrate.rest_listen}"

    def start_workflow(self, specification: str, name: str = "e2e") -> str:
        return self.call(
            lambda: self.service.start_workflow(
                self.admin, raw_specification=specification, name=name
            )
        )

    def workflow(self, workflow_id: str) -> WorkflowView:
        return self.call(lambda: self.service.get_workflow(self.admin, workflow_id))

    def events(self, workflow_id: str) -> list[Any]:
        return self.call(lambda: self.service.list_events(self.admin, workflow_id))

    def logs(self, workflow_id: str, stage: str | None = None) -> str:
        """The whole output of the workflow (or of one stage), every page of it."""
        query = LogQuery(workflow_id, stage)
        pages = self.call(lambda: list(read_all(self.service, self.admin, query)))
        return "".join(chunk.data for page in pages for chunk in page)

    def stop_workflow(self, workflow_id: str) -> None:
        self.call(lambda: self.service.stop_workflow(self.admin, workflow_id))

    def nodes(self) -> list[Any]:
        return self.call(lambda: self.service.list_nodes(self.admin))

    def wait_for(
        self,
        workflow_id: str,
        condition: Callable[[WorkflowView], bool] = lambda w: w.status in TERMINAL,
        timeout: float = 60.0,
    ) -> WorkflowView:
        """Poll the workflow until ``condition`` holds; fail with its state otherwise."""
        deadline = time.monotonic() + timeout
        while True:
            view = self.workflow(workflow_id)
            if condition(view):
                return view
            if time.monotonic() > deadline:
                raise AssertionError(f"workflow did not get there in {timeout}s: {view}")
            time.sleep(0.05)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self._stop.set)
        try:
            self._serving.result(15)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=10)


class OrchestrateProcess:
    """``fuzzball-orchestrate --config F serve`` as a child process."""

    def __init__(self, config_path: Path, log_path: Path) -> None:
        self.config_path = config_path
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    ORCHESTRATE_MAIN,
                    "--config",
                    str(self.config_path),
                    "serve",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=REPO_ROOT,
            )

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


class SubstrateProcess:
    """``fuzzball-substrate --config F`` as a child process, started through ``wrapper``
    (e.g. ``nsenter --net=...``) when one is given."""

    def __init__(self, config_path: Path, log_path: Path, wrapper: Sequence[str] = ()) -> None:
        self.config_path = config_path
        self.log_path = log_path
        with log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [*wrapper, sys.executable, "-c", SUBSTRATE_MAIN, "--config", str(config_path)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=REPO_ROOT,
            )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL, as a crash of the node would (its containers end with it)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class Cluster:
    """Orchestrate in this process plus N Substrate agents, sharing one configuration base."""

    def __init__(
        self,
        directory: Path,
        registry_url: str,
        *,
        agents: int = 2,
        cores: int = 4,
        memory: str = "4GiB",
        substrate: dict[str, Any] | None = None,
        lease: float = 15.0,
        annotations_per_node: bool = False,
        orchestrate: dict[str, Any] | None = None,
        images: dict[str, Any] | None = None,
        per_node: Sequence[dict[str, Any]] = (),
        host: str = "127.0.0.1",
        wrappers: Sequence[Sequence[str]] = (),
        tls: dict[str, Any] | None = None,
    ) -> None:
        """``per_node[i]`` adds to (and overrides) agent ``i``'s ``substrate`` settings;
        ``wrappers[i]`` starts agent ``i`` (e.g. in its own network namespace), and
        Orchestrate listens on ``host``; ``tls`` is every process's ``tls`` section
        (plaintext without it)."""
        self.directory = directory
        port = free_port()
        rest_port = free_port()
        shared = {
            "rest_port": rest_port,
            "orchestrate": orchestrate,
            "images": images,
            "host": host,
            "tls": tls,
        }
        base = cluster_config(directory, registry_url, grpc_port=port, lease=lease, **shared)
        self.orchestrate = InProcessOrchestrate(base)
        self.agents: list[SubstrateProcess] = []
        try:
            for index in range(agents):
                name = f"node-{index + 1}"
                config = cluster_config(
                    directory,
                    registry_url,
                    grpc_port=port,
                    lease=lease,
                    **shared,
                    substrate={
                        "node-name": name,
                        "work-dir": str(directory / name),
                        "cores": cores,
                        "memory": memory,
                        "annotations": (
                            {"e2e/node": str(index + 1)} if annotations_per_node else {}
                        ),
                        **(substrate or {}),
                        **(per_node[index] if index < len(per_node) else {}),
                    },
                )
                path = write_config(directory / f"{name}.yaml", config)
                wrapper = wrappers[index] if index < len(wrappers) else ()
                self.agents.append(SubstrateProcess(path, directory / f"{name}.log", wrapper))
            self.wait_for_nodes(agents)
        except BaseException:
            self.close()
            raise

    def agent(self, name: str) -> SubstrateProcess:
        """The agent of node ``name`` (``node-1``, ``node-2``, ...)."""
        return self.agents[int(name.removeprefix("node-")) - 1]

    def wait_for_nodes(self, count: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            ready = [n for n in self.orchestrate.nodes() if n.status == "READY"]
            if len(ready) >= count:
                return
            for agent in self.agents:
                if agent.process.poll() is not None:
                    raise AssertionError(f"an agent exited:\n{agent.log()[-3000:]}")
            if time.monotonic() > deadline:
                logs = "\n".join(a.log()[-2000:] for a in self.agents)
                raise AssertionError(f"only {len(ready)} of {count} nodes are ready:\n{logs}")
            time.sleep(0.1)

    def close(self) -> None:
        for index, agent in enumerate(self.agents):
            agent.stop()
            # an agent that was killed leaves its image mounts until one sweeps its state
            sweep(self.directory / f"node-{index + 1}" / "runtime")
        self.orchestrate.close()
