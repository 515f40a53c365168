"""One chaos round: a real cluster, a stream of workflows, faults at random times, and the
invariants checked at the end.

A round is drawn from one seed (:func:`plan_round`): which workflows are submitted when
(task arrays, dependency chains, retried jobs, services, jobs exiting with a code of their
own, jobs whose image is pulled during the round) and which faults strike when: Orchestrate
or a Substrate SIGKILLed and started again, the SQLite database held by another connection
with ``BEGIN EXCLUSIVE``, the data directory (a small tmpfs) filled and freed, the registry
killed while nodes pull from it, the PostgreSQL server stopped as a crash would and started
again. :func:`run_round` plays it against a fresh cluster (Orchestrate as a child process on
the tmpfs data directory, two Substrates with real containers, the shared local registry)
and returns the violations it found:

* every workflow reaches a final state within the bound, and so does every stage in it;
* no job (or task) runs more often than its ``policy.retry`` allows, counted from the
  markers each run sends the moment it starts;
* every exit code the API reports is one the job's command really exited with (or a signal's,
  for a run that was killed before it ended);
* a job that really finished is not recorded as failed by its node while no node was lost;
* every answer of the API was a JSON object, and every error a ``google.rpc.Status``;
* once every fault is undone the cluster works again without a restart: a workflow submitted
  then finishes and Orchestrate's ``/readyz`` answers 200.

Everything a round starts is stopped, and everything it mounts unmounted, even when it fails.
"""

from __future__ import annotations

import contextlib
import random
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fuzzball_core.config import parse_config
from fuzzball_runtime import sweep
from support.chaos_parts import (
    MarkerServer,
    PrivatePostgres,
    RecordingApi,
    SmallDataDir,
    SqliteLock,
)
from support.cluster import (
    LocalRegistry,
    OrchestrateProcess,
    SubstrateProcess,
    build_orchestrate,
    cluster_config,
    free_port,
    write_config,
)
from support.oci_pusher import Pusher, busybox_entries, file, layer

#: Fault kinds, each a SIGKILL or a hold followed by the recovery after a drawn pause.
ORCHESTRATE_KILL = "orchestrate-kill"
SUBSTRATE_KILL = "substrate-kill"
SQLITE_LOCK = "sqlite-lock"
DISK_FULL = "disk-full"
REGISTRY_KILL = "registry-kill"
POSTGRES_RESTART = "postgres-restart"
SQLITE_FAULTS = (ORCHESTRATE_KILL, SUBSTRATE_KILL, SQLITE_LOCK, DISK_FULL, REGISTRY_KILL)
POSTGRES_FAULTS = (ORCHESTRATE_KILL, SUBSTRATE_KILL, DISK_FULL, REGISTRY_KILL, POSTGRES_RESTART)

#: How long each kind of fault lasts (seconds, drawn uniformly): the process is down, the
#: lock held, the disk full.
FAULT_SECONDS = {
    ORCHESTRATE_KILL: (0.2, 1.5),
    SUBSTRATE_KILL: (0.3, 2.0),
    SQLITE_LOCK: (2.0, 5.0),
    DISK_FULL: (1.5, 4.0),
    REGISTRY_KILL: (0.5, 2.5),
    POSTGRES_RESTART: (0.5, 2.5),
}
#: Exit codes a job can end with, and a signal's (a run killed before it ended: 128 + N).
SIGNAL_CODES = range(128, 160)
#: What a job does when its markers cannot reach the server: a code no plan uses.
MARKER_FAILED = 97
#: A node's lease: short, so a lost node's runs end within a round, yet longer than an agent
#: takes to reconnect to an Orchestrate that was down a second or two.
LEASE_SECONDS = 8.0
TERMINAL = {"STAGE_STATUS_FINISHED", "STAGE_STATUS_FAILED", "STAGE_STATUS_CANCELED"}


# --- the plan of a round ----------------------------------------------------------------------


@dataclass(frozen=True)
class JobPlan:
    """One job of a workflow: what its command exits with and how many runs it may have.

    ``exits``: ``ok`` (0), ``fail`` (``code`` every time; with ``task``, only that task) or
    ``flaky`` (``code`` on its first run, 0 after); ``retry_on`` and ``attempts`` its
    ``policy.retry``."""

    name: str
    exits: str = "ok"
    code: int = 0
    task: int | None = None
    tasks: int | None = None
    sleep: float = 0.5
    retry_on: tuple[str | int, ...] = ()
    attempts: int = 1
    depends_on: str | None = None
    image: str = "docker://alpine:latest"
    needs_service: str | None = None

    @property
    def max_runs(self) -> int:
        """How many runs of one task its retry policy allows."""
        return 1 + (self.attempts if self.retry_on else 0)


@dataclass(frozen=True)
class ServicePlan:
    """A service on the node's network that its dependent job fetches a page from."""

    name: str
    port: int


@dataclass(frozen=True)
class WorkflowPlan:
    """A workflow to submit at ``at`` seconds into the round."""

    at: float
    name: str
    kind: str
    jobs: tuple[JobPlan, ...]
    services: tuple[ServicePlan, ...] = ()

    def specification(self, marker_url: str) -> str:
        """The workflow file (v1), with each job reporting to ``marker_url``."""
        lines = ["version: v1"]
        if self.services:
            lines.append("services:")
            for service in self.services:
                lines += _service_lines(service)
        lines.append("jobs:")
        for job in self.jobs:
            lines += _job_lines(job, marker_url)
        return "\n".join(lines) + "\n"


def _service_lines(service: ServicePlan) -> list[str]:
    return [
        f"  {service.name}:",
        "    image: {uri: docker://alpine:latest}",
        "    script: |",
        "      busybox mkdir -p /www && echo served > /www/index.html",
        f"      exec busybox httpd -f -p 127.0.0.1:{service.port} -h /www",
        f"    readiness-probe: {{http-get: {{port: {service.port}, path: /index.html}},"
        " period-seconds: 1}",
    ]


def _exit_expression(job: JobPlan) -> str:
    """Shell text giving the code this run exits with (``$n``: its earlier runs)."""
    if job.exits == "flaky":
        return f'$(test "$n" = 0 && echo {job.code} || echo 0)'
    if job.exits == "fail" and job.task is not None:
        return f'$(test "$FB_TASK_ID" = {job.task} && echo {job.code} || echo 0)'
    if job.exits == "fail":
        return str(job.code)
    return "0"


def _job_lines(job: JobPlan, marker_url: str) -> list[str]:
    fetch = ""
    if job.needs_service is not None:
        fetch = f"busybox wget -qO- http://127.0.0.1:{job.needs_service}/index.html || code=98"
    script = [
        "#!/bin/sh",
        f'k="$FB_WORKFLOW_ID/{job.name}/${{FB_TASK_ID:-0}}"',
        f'n=$(busybox wget -qO- "{marker_url}/start/$k") || exit {MARKER_FAILED}',
        f"busybox sleep {job.sleep:.2f}",
        f"code={_exit_expression(job)}",
        fetch,
        f'busybox wget -qO- "{marker_url}/end/$k/$code" >/dev/null || exit {MARKER_FAILED}',
        "exit $code",
    ]
    lines = [
        f"  {job.name}:",
        f"    image: {{uri: {job.image}}}",
        "    script: |",
        *(f"      {line}" for line in script if line),
    ]
    if job.tasks is not None:
        lines.append(f"    task-array: {{start: 1, end: {job.tasks}}}")
    if job.retry_on:
        causes = ", ".join(str(c) for c in job.retry_on)
        lines.append(f"    policy: {{retry: {{on: [{causes}], attempts: {job.attempts}}}}}")
    depends = []
    if job.depends_on is not None:
        depends.append(f"{{name: {job.depends_on}}}")
    if job.needs_service is not None:
        depends.append("{name: web, status: RUNNING}")
    if depends:
        lines.append(f"    depends-on: [{', '.join(depends)}]")
    return lines


@dataclass(frozen=True)
class Fault:
    """``kind`` strikes at ``at`` seconds into the round and is undone ``lasts`` seconds later;
    ``target`` picks the Substrate (its index) for a Substrate kill."""

    at: float
    kind: str
    lasts: float
    target: int = 0


@dataclass(frozen=True)
class RoundPlan:
    """Everything one seed decides about a round."""

    seed: int
    backend: str
    window: float
    workflows: tuple[WorkflowPlan, ...]
    faults: tuple[Fault, ...]
    image: str

    def describe(self) -> str:
        """One line: the seed, the database and what happens when."""
        kinds = ", ".join(f"{f.kind}@{f.at:.1f}s/{f.lasts:.1f}s" for f in self.faults)
        shapes = ", ".join(w.kind for w in self.workflows)
        return f"seed {self.seed} on {self.backend}: faults [{kinds}]; workflows [{shapes}]"


def _draw_behaviour(rng: random.Random) -> dict[str, Any]:
    draw = rng.random()
    if draw < 0.5:
        return {"exits": "ok"}
    if draw < 0.75:
        return {"exits": "fail", "code": rng.randint(1, 5)}
    return {"exits": "flaky", "code": 3, "retry_on": (3,), "attempts": rng.randint(1, 2)}


def _draw_workflow(rng: random.Random, at: float, index: int, image: str) -> WorkflowPlan:
    kind = rng.choice(["array", "chain", "retry", "service", "exit", "pull"])
    name = f"chaos-{index}-{kind}"
    sleep = round(rng.uniform(0.3, 2.5), 2)
    node_retry: dict[str, Any] = {}
    if rng.random() < 0.5:
        node_retry = {"retry_on": ("node",), "attempts": rng.randint(1, 2)}
    if kind == "array":
        tasks = rng.randint(2, 6)
        behaviour = rng.choice(
            [
                {"exits": "ok"},
                {"exits": "fail", "code": rng.randint(1, 5), "task": rng.randint(1, tasks)},
                {"exits": "flaky", "code": 3, "retry_on": (3, "node"), "attempts": 2},
            ]
        )
        options = {**node_retry, **behaviour}
        return WorkflowPlan(
            at, name, kind, (JobPlan("tasks", tasks=tasks, sleep=sleep, **options),)
        )
    if kind == "chain":
        jobs = []
        for position, job in enumerate(("first", "second", "third")):
            previous = ("first", "second")[position - 1] if position else None
            behaviour = _draw_behaviour(rng)
            jobs.append(JobPlan(job, sleep=sleep / 2, depends_on=previous, **behaviour))
        return WorkflowPlan(at, name, kind, tuple(jobs))
    if kind == "retry":
        causes: tuple[str | int, ...] = (3, "node") if node_retry else (3,)
        job = JobPlan(
            "flaky", exits="flaky", code=3, sleep=sleep, retry_on=causes, attempts=rng.randint(1, 2)
        )
        return WorkflowPlan(at, name, kind, (job,))
    if kind == "service":
        port = free_port()
        job = JobPlan("fetch", sleep=sleep / 2, needs_service=str(port), **node_retry)
        return WorkflowPlan(at, name, kind, (job,), (ServicePlan("web", port),))
    if kind == "exit":
        job = JobPlan("exits", exits="fail", code=rng.randint(1, 5), sleep=sleep)
        return WorkflowPlan(at, name, kind, (job,))
    return WorkflowPlan(
        at, name, kind, (JobPlan("pulled", image=image, sleep=sleep, **node_retry),)
    )


def plan_round(
    seed: int,
    *,
    backend: str,
    window: float = 12.0,
    workflows: tuple[int, int] = (5, 8),
    every_fault: bool = False,
) -> RoundPlan:
    """Draw a round from ``seed``: workflows submitted over ``window`` seconds and faults
    among them (each kind the database allows once with ``every_fault``, else 2-4 drawn)."""
    rng = random.Random(seed)
    image = f"docker://chaos-{seed}:latest"
    count = rng.randint(*workflows)
    times = sorted(round(rng.uniform(0.0, window * 0.8), 2) for _ in range(count))
    plans = [_draw_workflow(rng, at, index, image) for index, at in enumerate(times)]
    if not any(p.kind == "pull" for p in plans):
        # the registry fault needs a pull in flight: the last workflow pulls the round's image
        last = plans[-1]
        job = JobPlan("pulled", image=image, sleep=0.5)
        plans[-1] = WorkflowPlan(last.at, f"chaos-{len(plans) - 1}-pull", "pull", (job,))
    kinds = list(SQLITE_FAULTS if backend == "sqlite" else POSTGRES_FAULTS)
    chosen = kinds if every_fault else [rng.choice(kinds) for _ in range(rng.randint(2, 4))]
    pull_at = next(p.at for p in plans if p.kind == "pull")
    faults = []
    busy_until: dict[str, float] = {}
    for kind in chosen:
        low, high = FAULT_SECONDS[kind]
        lasts = round(rng.uniform(low, high), 2)
        if kind == REGISTRY_KILL:
            at = pull_at + rng.uniform(0.05, 0.8)
        else:
            at = rng.uniform(0.5, window * 0.9)
        at = round(max(at, busy_until.get(kind, 0.0)), 2)
        busy_until[kind] = at + lasts + 1.0
        faults.append(Fault(at, kind, lasts, target=rng.randint(0, 1)))
    faults.sort(key=lambda f: f.at)
    return RoundPlan(seed, backend, window, tuple(plans), tuple(faults), image)


# --- the cluster of a round -------------------------------------------------------------------


class ChaosCluster:
    """Orchestrate as a child process on a tmpfs data directory, two Substrates, the shared
    registry, the marker server and the API client; :meth:`close` undoes all of it."""

    def __init__(
        self,
        directory: Path,
        registry: LocalRegistry,
        *,
        postgres: PrivatePostgres | None,
        cores: int = 4,
    ) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.registry = registry
        self.postgres = postgres
        self.database_name: str | None = None
        self.data = SmallDataDir(directory / "data")
        self.lock: SqliteLock | None = None
        self.agents: list[SubstrateProcess] = []
        self.agent_configs: list[Path] = []
        self.orchestrate: OrchestrateProcess | None = None
        self.markers = MarkerServer(directory / "markers.log")
        self.api: RecordingApi | None = None
        # what a fault took down (not to be restarted by supervise), guarded against the
        # fault thread and the main thread acting at once
        self._down: set[str] = set()
        self._guard = threading.Lock()
        try:
            self._start(cores)
        except BaseException:
            self.close()
            raise

    def _start(self, cores: int) -> None:
        self.data.mount()
        if self.postgres is not None:
            self.database_name = f"chaos_{uuid.uuid4().hex[:10]}"
            url = self.postgres.create_database(self.database_name)
        else:
            url = f"sqlite:///{self.data.path / 'orchestrate.db'}"
            self.lock = SqliteLock(self.data.path / "orchestrate.db")
        grpc_port, rest_port = free_port(), free_port()
        shared = {"grpc_port": grpc_port, "rest_port": rest_port, "lease": LEASE_SECONDS}
        base = cluster_config(self.directory, self.registry.url, **shared)
        base["data-dir"] = str(self.data.path)
        base["database"] = {"url": url}
        self.rest_url = f"http://{base['orchestrate']['rest-listen']}"
        token = _admin_token(base)
        config_path = write_config(self.directory / "orchestrate.yaml", base)
        self.orchestrate = OrchestrateProcess(config_path, self.directory / "orchestrate.log")
        self.orchestrate.start()
        for index in range(2):
            name = f"node-{index + 1}"
            config = cluster_config(
                self.directory,
                self.registry.url,
                **shared,
                substrate={
                    "node-name": name,
                    "work-dir": str(self.directory / name),
                    "cores": cores,
                    "memory": "2GiB",
                    "metrics-listen": f"127.0.0.1:{free_port()}",
                },
            )
            config["data-dir"] = str(self.data.path)
            path = write_config(self.directory / f"{name}.yaml", config)
            self.agent_configs.append(path)
            self.agents.append(SubstrateProcess(path, self.directory / f"{name}.log"))
        self.api = RecordingApi(self.rest_url, token)
        self._wait_for_nodes(2)
        # a server still starting refuses connections: the round counts those of its faults
        self.api.answers = [a for a in self.api.answers if a.status != 0]

    def _wait_for_nodes(self, count: int, timeout: float = 90.0) -> None:
        assert self.api is not None
        deadline = time.monotonic() + timeout
        while True:
            status, body = self.api.request("GET", "/nodes")
            nodes = body.get("nodes", []) if status == 200 and isinstance(body, dict) else []
            if sum(1 for n in nodes if "READY" in str(n.get("status"))) >= count:
                return
            for agent in self.agents:
                if agent.process.poll() is not None:
                    raise RuntimeError(f"an agent exited:\n{agent.log()[-3000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the nodes did not register: {nodes}")
            time.sleep(0.2)

    # -- faults --------------------------------------------------------------------------------

    def kill_orchestrate(self) -> None:
        assert self.orchestrate is not None
        with self._guard:
            self._down.add("orchestrate")
            self.orchestrate.kill()

    def start_orchestrate(self) -> None:
        assert self.orchestrate is not None
        with self._guard:
            self._down.discard("orchestrate")
            self.orchestrate.start()

    def kill_substrate(self, index: int) -> None:
        with self._guard:
            self._down.add(f"node-{index + 1}")
            self.agents[index].kill()

    def start_substrate(self, index: int) -> None:
        with self._guard:
            self._down.discard(f"node-{index + 1}")
            path = self.agent_configs[index]
            self.agents[index] = SubstrateProcess(path, self.directory / f"node-{index + 1}.log")

    def supervise(self) -> list[str]:
        """Start again, as a service manager would, a process that exited by itself (not one
        a fault killed); a line for each, with the end of its log."""
        exits = []
        with self._guard:
            orchestrate = self.orchestrate
            process = orchestrate.process if orchestrate is not None else None
            if (
                process is not None
                and "orchestrate" not in self._down
                and process.poll() is not None
            ):
                tail = _tail(self.directory / "orchestrate.log")
                exits.append(f"Orchestrate exited by itself ({process.returncode}): {tail}")
                orchestrate.start()  # type: ignore[union-attr]
            for index, agent in enumerate(self.agents):
                name = f"node-{index + 1}"
                if name not in self._down and agent.process.poll() is not None:
                    tail = _tail(agent.log_path)
                    exits.append(f"{name} exited by itself ({agent.process.returncode}): {tail}")
                    self.agents[index] = SubstrateProcess(self.agent_configs[index], agent.log_path)
        return exits

    def lock_database(self) -> None:
        if self.lock is not None:
            self.lock.hold()

    def unlock_database(self) -> None:
        if self.lock is not None:
            self.lock.release()

    def kill_registry(self) -> None:
        self.registry.server.kill()

    def start_registry(self) -> None:
        self.registry.server.start()

    def stop_postgres(self) -> None:
        if self.postgres is not None:
            self.postgres.stop()

    def start_postgres(self) -> None:
        if self.postgres is not None:
            self.postgres.start()

    # -- the end -------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop everything the round started and unmount its data directory; a fault still in
        force (lock, full disk, a process down) is undone first."""
        with contextlib.suppress(Exception):
            self.unlock_database()
        with contextlib.suppress(Exception):
            self.data.free()
        if not _registry_up(self.registry):
            with contextlib.suppress(Exception):
                self.start_registry()
        for index, agent in enumerate(self.agents):
            agent.stop()
            # a killed agent leaves image mounts and cgroups until one sweeps its state
            with contextlib.suppress(Exception):
                sweep(self.directory / f"node-{index + 1}" / "runtime")
        if self.orchestrate is not None:
            self.orchestrate.stop()
        if self.api is not None:
            self.api.close()
        self.markers.close()
        if self.postgres is not None and self.database_name is not None:
            with contextlib.suppress(Exception):
                self.postgres.start()
            self.postgres.drop_database(self.database_name)
        self.data.unmount()


def _tail(log: Path, lines: int = 6) -> str:
    """The last lines of a process's log, on one line."""
    text = log.read_text(errors="replace") if log.exists() else ""
    return " | ".join(text.strip().splitlines()[-lines:])


def _registry_up(registry: LocalRegistry) -> bool:
    process = registry.server._process
    return process is not None and process.poll() is None


def _admin_token(config: dict[str, Any]) -> str:
    """An administrator's token, made on the store before Orchestrate serves it (as an
    operator's ``fuzzball-orchestrate create-account --admin`` would)."""
    orchestrate = build_orchestrate(parse_config(config))
    _, token = orchestrate.service.create_account("chaos-admin", admin=True)
    return str(token)


def push_round_image(registry: LocalRegistry, image: str, seed: int) -> None:
    """Push the round's own image (busybox and a few MiB of noise), so that nodes pull it
    during the round and a registry kill can catch them at it."""
    name = image.removeprefix("docker://").rsplit(":", 1)[0]
    noise = random.Random(seed).randbytes(3 << 20)
    pusher = Pusher(registry.url)
    try:
        pusher.push_image(
            f"library/{name}",
            "latest",
            [layer(busybox_entries()), layer([file("opt/noise", noise)])],
        )
    finally:
        pusher.close()


# --- playing a round --------------------------------------------------------------------------


@dataclass
class RoundReport:
    """What a round found: ``violations`` (empty when every invariant held) and counts."""

    plan: RoundPlan
    violations: list[str] = field(default_factory=list)
    submitted: int = 0
    refused: int = 0
    final: dict[str, int] = field(default_factory=dict)
    answers: int = 0
    unanswered: int = 0
    timed_out: int = 0
    #: what happened that is no violation but worth reading: processes that exited by
    #: themselves and were started again, refused submissions
    notes: list[str] = field(default_factory=list)
    #: each workflow's end: its name, status and the errors of its stages
    outcomes: list[str] = field(default_factory=list)
    errors: int = 0
    seconds: float = 0.0
    executions: int = 0

    def summary(self) -> str:
        """One line for the round's result."""
        state = "ok" if not self.violations else f"{len(self.violations)} VIOLATIONS"
        finals = " ".join(f"{k.removeprefix('STAGE_STATUS_')}={v}" for k, v in self.final.items())
        return (
            f"seed {self.plan.seed} ({self.plan.backend}): {state}; {self.submitted} workflows"
            f" ({self.refused} refused) -> {finals}; {self.executions} runs;"
            f" {self.answers} API answers ({self.errors} errors, {self.unanswered}"
            f" unanswered, {self.timed_out} of them timed out);"
            f" {self.seconds:.1f}s"
        )


@dataclass(frozen=True)
class Action:
    """One thing the round's timeline does at ``at`` seconds."""

    at: float
    what: str
    run: Callable[[], None]


def _fault_actions(cluster: ChaosCluster, plan: RoundPlan) -> list[Action]:
    """Each fault's strike and its undoing, in time order."""
    moves: dict[str, tuple[Callable[[Fault], None], Callable[[Fault], None]]] = {
        ORCHESTRATE_KILL: (
            lambda f: cluster.kill_orchestrate(),
            lambda f: cluster.start_orchestrate(),
        ),
        SUBSTRATE_KILL: (
            lambda f: cluster.kill_substrate(f.target),
            lambda f: cluster.start_substrate(f.target),
        ),
        SQLITE_LOCK: (lambda f: cluster.lock_database(), lambda f: cluster.unlock_database()),
        DISK_FULL: (lambda f: cluster.data.fill(), lambda f: cluster.data.free()),
        REGISTRY_KILL: (lambda f: cluster.kill_registry(), lambda f: cluster.start_registry()),
        POSTGRES_RESTART: (lambda f: cluster.stop_postgres(), lambda f: cluster.start_postgres()),
    }
    actions = []
    for fault in plan.faults:
        strike, recover = moves[fault.kind]
        actions.append(Action(fault.at, f"{fault.kind} starts", lambda f=fault, s=strike: s(f)))
        actions.append(
            Action(fault.at + fault.lasts, f"{fault.kind} ends", lambda f=fault, r=recover: r(f))
        )
    return sorted(actions, key=lambda a: a.at)


class FaultThread(threading.Thread):
    """Plays the faults on their own clock, so a client waiting on a locked database or a
    server that is down never delays them; records when each Substrate kill struck and the
    first error of an action (the round then fails with it)."""

    def __init__(self, actions: list[Action], start: float, say: Callable[[str], None]) -> None:
        super().__init__(daemon=True)
        self.actions = actions
        self.start_time = start
        self.say = say
        self.substrate_kills: list[float] = []
        self.error: str | None = None

    def run(self) -> None:
        for action in self.actions:
            time.sleep(max(0.0, self.start_time + action.at - time.monotonic()))
            self.say(f"  {time.monotonic() - self.start_time:5.1f}s {action.what}")
            if action.what == f"{SUBSTRATE_KILL} starts":
                self.substrate_kills.append(time.monotonic())
            try:
                action.run()
            except Exception as exc:  # the round reports it rather than dying silently
                self.error = f"{action.what}: {type(exc).__name__}: {exc}"
                return


def run_round(
    plan: RoundPlan,
    directory: Path,
    registry: LocalRegistry,
    *,
    postgres: PrivatePostgres | None = None,
    settle: float = 120.0,
    say: Callable[[str], None] = lambda _: None,
) -> RoundReport:
    """Play ``plan`` on a fresh cluster in ``directory`` and check the invariants."""
    began = time.monotonic()
    report = RoundReport(plan)
    push_round_image(registry, plan.image, plan.seed)
    cluster = ChaosCluster(
        directory, registry, postgres=postgres if plan.backend != "sqlite" else None
    )
    submitted: dict[str, WorkflowPlan] = {}
    try:
        api = cluster.api
        assert api is not None

        def submit(workflow: WorkflowPlan) -> None:
            spec = workflow.specification(cluster.markers.url)
            workflow_id = api.submit(spec, workflow.name, patience=10.0)
            report.submitted += 1
            if workflow_id is None:
                report.refused += 1
            else:
                submitted[workflow_id] = workflow

        start = time.monotonic()
        faults = FaultThread(_fault_actions(cluster, plan), start, say)
        faults.start()
        for workflow in plan.workflows:
            pause = start + workflow.at - time.monotonic()
            if pause > 0:
                _poll_while(api, list(submitted), pause, cluster, report)
            say(f"  {time.monotonic() - start:5.1f}s submit {workflow.name}")
            submit(workflow)
        while faults.is_alive():
            _poll_while(api, list(submitted), 0.5, cluster, report)
        if faults.error is not None:
            report.violations.append(f"a fault could not be played: {faults.error}")
        report.violations += _settle(api, submitted, settle, report, cluster)
        report.violations += _check_recovered(api, cluster, submitted, report)
        report.violations += _check_workflows(
            api, cluster.markers, submitted, faults.substrate_kills
        )
        report.violations += _check_answers(api)
        report.executions = sum(1 for m in cluster.markers.markers if m.kind == "start")
        report.answers = len(api.answers)
        report.notes += [f"submission refused: {r}" for r in api.refusals]
        report.notes += _unanswered_kinds(api)
        report.unanswered = sum(1 for a in api.answers if a.status == 0)
        report.timed_out = sum(1 for a in api.answers if a.status == 0 and "Timeout" in a.body)
        report.errors = sum(1 for a in api.answers if a.status >= 400)
    finally:
        cluster.close()
        report.violations += _leftovers(directory, list(submitted))
        report.seconds = time.monotonic() - began
    return report


#: Submitted once every fault is undone and every workflow ended: it must finish.
CANARY = WorkflowPlan(
    0.0, "chaos-canary", "canary", (JobPlan("canary", sleep=0.2, retry_on=("node",), attempts=2),)
)
#: Canaries tried before the cluster is said not to work again: a canary's image stage is
#: not retried when the node it was sent to turns out lost (a Substrate just restarted).
CANARY_TRIES = 3


def _check_recovered(
    api: RecordingApi,
    cluster: ChaosCluster,
    submitted: dict[str, WorkflowPlan],
    report: RoundReport,
    bound: float = 60.0,
) -> list[str]:
    """Once the faults are undone and the round's workflows ended, the cluster works again
    without a restart: a canary workflow finishes (up to :data:`CANARY_TRIES`, each failure
    noted) and Orchestrate's ``/readyz`` answers 200."""
    failures = []
    for _ in range(CANARY_TRIES):
        report.notes += cluster.supervise()
        spec = CANARY.specification(cluster.markers.url)
        canary_id = api.submit(spec, CANARY.name, patience=30.0)
        if canary_id is None:
            failures.append(f"refused: {api.refusals[-1:]}")
            continue
        submitted[canary_id] = CANARY
        view = _wait_for_end(api, canary_id, bound)
        if view is not None and view.get("status") == "STAGE_STATUS_FINISHED":
            break
        failures.append(_stages_text(view))
    else:
        return [f"no workflow finished once every fault was undone: {failures}"]
    report.notes += [f"a canary failed before one finished: {f}" for f in failures]
    deadline = time.monotonic() + bound
    while True:
        status, body = api.request("GET", "/readyz")
        if status == 200:
            return []
        if time.monotonic() > deadline:
            return [f"/readyz still answers {status} once every fault was undone: {body}"]
        time.sleep(0.5)


def _wait_for_end(api: RecordingApi, workflow_id: str, bound: float) -> dict[str, Any] | None:
    """The workflow's view once it ended, or its last view after ``bound`` seconds."""
    deadline = time.monotonic() + bound
    while True:
        view = api.workflow(workflow_id)
        if (view is not None and view.get("status") in TERMINAL) or time.monotonic() > deadline:
            return view
        time.sleep(0.3)


def _poll_while(
    api: RecordingApi,
    workflow_ids: list[str],
    seconds: float,
    cluster: ChaosCluster,
    report: RoundReport,
) -> None:
    """Use the API as a user watching their workflows would until ``seconds`` have passed
    (and keep the cluster's processes supervised meanwhile)."""
    deadline = time.monotonic() + seconds
    turn = 0
    while time.monotonic() < deadline:
        report.notes += cluster.supervise()
        if workflow_ids:
            api.workflow(workflow_ids[turn % len(workflow_ids)])
        elif turn % 3 == 0:
            api.request("GET", "/nodes")
        turn += 1
        time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))


def _settle(
    api: RecordingApi,
    submitted: dict[str, WorkflowPlan],
    bound: float,
    report: RoundReport,
    cluster: ChaosCluster,
) -> list[str]:
    """Wait (up to ``bound`` seconds) for every workflow the server knows to end."""
    deadline = time.monotonic() + bound
    pending: set[str] = set(submitted)
    while True:
        listed = api.workflow_ids()
        if listed is not None:
            pending |= set(listed)
        views = {w: api.workflow(w) for w in sorted(pending)}
        open_ones = {w: v for w, v in views.items() if v is None or v.get("status") not in TERMINAL}
        if not open_ones:
            report.final = {}
            for workflow_id, view in views.items():
                status = str(view.get("status")) if view else "?"
                report.final[status] = report.final.get(status, 0) + 1
                report.outcomes.append(f"{_name(submitted, workflow_id)}: {_stages_text(view)}")
            return []
        if time.monotonic() > deadline:
            return [
                f"workflow {w} ({_name(submitted, w)}) did not end within {bound:.0f}s: "
                f"{_stages_text(v)}"
                for w, v in open_ones.items()
            ]
        report.notes += cluster.supervise()
        time.sleep(0.5)


def _name(submitted: dict[str, WorkflowPlan], workflow_id: str) -> str:
    plan = submitted.get(workflow_id)
    return plan.name if plan else "not one this round submitted"


def _stages_text(view: dict[str, Any] | None) -> str:
    if view is None:
        return "the API did not answer"
    return "; ".join(
        f"{s.get('name')}={str(s.get('status', 'PENDING')).removeprefix('STAGE_STATUS_')}"
        f" ({s.get('error', '')})"
        for s in view.get("jobs", [])
    )


def _task_keys(workflow_id: str, job: JobPlan) -> list[str]:
    tasks = range(1, job.tasks + 1) if job.tasks is not None else [0]
    return [f"{workflow_id}/{job.name}/{task}" for task in tasks]


def _check_workflows(
    api: RecordingApi,
    markers: MarkerServer,
    submitted: dict[str, WorkflowPlan],
    substrate_kills: list[float],
) -> list[str]:
    """The invariants of each workflow, read from the API and the jobs' markers."""
    found: list[str] = []
    for workflow_id, plan in submitted.items():
        view = api.workflow(workflow_id)
        events = api.events(workflow_id)
        api.logs(workflow_id)
        if view is None or events is None:
            found.append(f"{plan.name} {workflow_id}: the API did not answer at the end")
            continue
        label = f"{plan.name} {workflow_id}"
        stages = {s.get("name"): s for s in view.get("jobs", [])}
        for name, stage in stages.items():
            if stage.get("status") not in TERMINAL:
                found.append(f"{label}: stage {name} waits forever ({_stages_text(view)})")
        for job in plan.jobs:
            stage = stages.get(f"jobs.{job.name}")
            exits = [
                e
                for e in events
                if e.get("kind") == "container_exited" and e.get("stageName") == f"jobs.{job.name}"
            ]
            for key in _task_keys(workflow_id, job):
                found += _check_task(
                    label, key, job, markers.of(key), exits, stage, substrate_kills
                )
    return found


def _task_of(key: str) -> int:
    return int(key.rsplit("/", 1)[1])


def _check_task(
    label: str,
    key: str,
    job: JobPlan,
    marks: list[Any],
    exits: list[dict[str, Any]],
    stage: dict[str, Any] | None,
    substrate_kills: list[float],
) -> list[str]:
    found = []
    task = _task_of(key)
    where = f"{label}: {job.name}" + (f" task {task}" if job.tasks is not None else "")
    starts = [m for m in marks if m.kind == "start"]
    ends = [m for m in marks if m.kind == "end"]
    if len(starts) > job.max_runs:
        found.append(f"{where} ran {len(starts)} times; its retry policy allows {job.max_runs}")
    real_codes = {m.code for m in ends}
    for event in exits:
        data = event.get("data", {})
        if job.tasks is not None and int(data.get("task_id", -1) or -1) != task:
            continue
        code = data.get("exit_code")
        if code is None:
            continue
        code = int(code)
        killed = len(starts) > len(ends) and code in SIGNAL_CODES
        if code not in real_codes and not killed:
            found.append(
                f"{where}: the API reports exit code {code}; its command exited with"
                f" {sorted(c for c in real_codes if c is not None) or 'nothing yet'}"
            )
    if stage is None:
        return found
    status = stage.get("status")
    details = stage.get("details", {})
    last_end = ends[-1] if ends else None
    if status == "STAGE_STATUS_FINISHED" and (last_end is None or last_end.code != 0):
        found.append(
            f"{where}: FINISHED, but its last run "
            + ("never reached its end" if last_end is None else f"exited {last_end.code}")
        )
    if job.tasks is None and "exitCode" in details and last_end is not None:
        reported = int(details["exitCode"])
        killed = len(starts) > len(ends) and reported in SIGNAL_CODES
        if reported != last_end.code and not killed and status == "STAGE_STATUS_FAILED":
            found.append(
                f"{where}: FAILED with exit code {reported}, its last run exited {last_end.code}"
            )
    lost_after = last_end is not None and any(k >= last_end.at - 1.0 for k in substrate_kills)
    if (
        job.tasks is None
        and status == "STAGE_STATUS_FAILED"
        and "exitCode" not in details
        and last_end is not None
        and last_end.code == 0
        and len(starts) == len(ends)
        and not lost_after
    ):
        found.append(
            f"{where}: recorded FAILED ({stage.get('error')}) though its last run exited 0"
            " and no node was lost after it"
        )
    return found


def _unanswered_kinds(api: RecordingApi) -> list[str]:
    """One line per kind of request that got no answer at all (refused, cut, timed out)."""
    kinds: dict[str, int] = {}
    for answer in api.answers:
        if answer.status == 0:
            what = answer.body.split(":", 1)[0]
            kinds[what] = kinds.get(what, 0) + 1
    return [f"no answer ({what}) to {count} requests" for what, count in kinds.items()]


def _check_answers(api: RecordingApi) -> list[str]:
    """Every answer a JSON object, every error a Status (one line per kind of problem)."""
    seen: dict[tuple[str, int, str], int] = {}
    examples: dict[tuple[str, int, str], str] = {}
    for answer in api.answers:
        if answer.problem is None and answer.status < 500:
            continue
        what = answer.problem or "a server error"
        key = (
            f"{answer.method} {answer.path.split('/')[1] if '/' in answer.path else answer.path}",
            answer.status,
            what,
        )
        seen[key] = seen.get(key, 0) + 1
        examples.setdefault(key, answer.body[:300])
    problems = []
    for (call, status, what), count in seen.items():
        if what == "a server error" and status in (503,):
            continue  # unavailable while the database is away: an honest answer
        problems.append(
            f"{count} x {call} answered {status}: {what}: {examples[(call, status, what)]}"
        )
    return problems


def _leftovers(directory: Path, workflow_ids: list[str]) -> list[str]:
    """Mounts of the round, and processes of it or of its jobs (their environment names
    their workflow), still there after it closed: each one is a leak (then removed)."""
    found = []
    text = str(directory)
    for mount in Path("/proc/self/mounts").read_text().splitlines():
        point = mount.split()[1]
        if point.startswith(text):
            found.append(f"mount left behind: {point}")
            subprocess.run(["umount", "-l", point], check=False, capture_output=True)
    marks = [text.encode(), *(f"FB_WORKFLOW_ID={w}".encode() for w in workflow_ids)]
    for process in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            seen = (process / "cmdline").read_bytes() + (process / "environ").read_bytes()
            if any(mark in seen for mark in marks):
                found.append(f"process left behind: {process.name} {seen[:120]!r}")
    return found


@contextlib.contextmanager
def private_postgres() -> Iterator[PrivatePostgres | None]:
    """A restartable PostgreSQL server of the suite's own, or None where none is installed."""
    from support.chaos_parts import postgres_binaries

    binaries = postgres_binaries()
    if binaries is None:
        yield None
        return
    server = PrivatePostgres(binaries, free_port())
    try:
        yield server
    finally:
        server.close()
