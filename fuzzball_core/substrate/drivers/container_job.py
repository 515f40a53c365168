"""The drivers of a workflow's own steps: a job's container, a service's, and a node's part
of a multinode job or service.

All three pull the step's image, fetch its volume ingress and start one container built by
:meth:`ContainerJobDriver.container_spec` from the job and the image's config (kept beside
the cached image; see :mod:`fuzzball_core.substrate.drivers.steps` for how each part
applies); a service is also probed for readiness, and a multinode part serves PMI to its
ranks and starts them through the rank launcher.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path

from fuzzball_core.drivers import ImageConfig
from fuzzball_core.errors import FuzzballError
from fuzzball_core.spec.models import Job, Probe, Service
from fuzzball_core.spec.multinode import OPEN_MPI
from fuzzball_core.spec.resources import job_resources
from fuzzball_core.substrate import hwloc, openmpi, rendezvous
from fuzzball_core.substrate.drivers.base import (
    LogSink,
    NodeServices,
    RunOutcome,
    RunRequest,
    StopReason,
    error_text,
)
from fuzzball_core.substrate.drivers.containers import ContainerDriver
from fuzzball_core.substrate.drivers.steps import (
    NO_CONFIG,
    container_hostname,
    cpu_limits,
    device_binds,
    file_binds,
    job_command,
    job_cwd,
    job_environment,
    job_variable_names,
    own_variables,
    prepare_devices,
    readable_file,
    report_warnings,
    script_bind,
    volume_binds,
    with_search_paths,
)
from fuzzball_core.substrate.env_scripts import (
    not_applied_notice,
    not_looked_for_notice,
    search_path_carriers,
    sourcing_env_scripts,
)
from fuzzball_core.substrate.images import describe_pull_failure, uri_scheme
from fuzzball_core.substrate.ingress import fetch_ingress
from fuzzball_core.substrate.network import NodeInterface, node_interface
from fuzzball_core.substrate.pmi import Fence, PmiService
from fuzzball_core.substrate.ranks import (
    LAUNCHER_SCRIPT,
    RankLayout,
    primary_interface,
    transport_environment,
)
from fuzzball_core.substrate.run_secrets import (
    WORKFLOW_TOKEN_ENV,
    RunSecrets,
    references_secrets,
)
from fuzzball_core.substrate.transfer_progress import SinkProgress
from fuzzball_runtime import DEVNULL, PIPE, Bind, ContainerSpec
from fuzzball_runtime.users import Identity, image_identity

log = logging.getLogger("fuzzball.substrate")
#: who a job runs as when its image names no user
ROOT = Identity(0, 0)

#: where the launcher of a node's several ranks is bound in a multinode job's container
RANKS_DIR = "/.fuzzball-ranks"
#: The fences of a multinode run outside PMI: the parts' addresses (and a generic job's
#: meeting point) before the containers start, ahead of PMI's barriers, which count from 1;
#: Open MPI's daemon commands once ``mpirun`` asked for them (its ranks use no PMI barrier).
ADDRESS_EXCHANGE = 0
DAEMON_EXCHANGE = 1


class ContainerJobDriver(ContainerDriver):
    """A job's container (``jobs.NAME``) on one node."""

    @property
    def job(self) -> Job | Service:
        """The step's definition (every run this driver gets has one)."""
        job = self.request.job
        assert job is not None, "an image stage's run has no container job"
        return job

    async def start(self) -> RunOutcome | None:
        """Pull the image, fetch the volume ingress, start the container; an outcome
        instead when any of it failed or the run was stopped meanwhile."""
        request, image_spec = self.request, self.job.image
        needed = references_secrets(self.job.env, image_spec.secret, request.volume_ingress)
        token: asyncio.Future[RunSecrets | RunOutcome] | None = None
        if needed or request.workflow_token:
            # needed: awaited before the image (its credentials); the token sent with the
            # assignment: at hand, no call
            secrets = await self.secrets(needed)
            if isinstance(secrets, RunOutcome):
                return secrets
        else:
            # Only the workflow's token to come, and only the container's environment needs
            # it: asked for now, awaited just before the container's process is created, so
            # the round trip to Orchestrate overlaps the image, cgroups and metering set-up.
            token = asyncio.ensure_future(self.secrets(needed))
            secrets = RunSecrets()
        try:
            # an image pinned here and still fresh needs no thread (most runs of an array)
            image = self.node.images.pinned(image_spec.uri)
            if image is None:
                image = await self.loop.run_in_executor(
                    self.node.pull_pool,
                    lambda: self.node.images.ensure(
                        image_spec.uri,
                        ttl=image_spec.cache_ttl,
                        credentials=secrets.image_credentials or None,
                    ),
                )
        except Exception as exc:
            return RunOutcome(message=describe_pull_failure(image_spec.uri, exc))
        if self.stopping is not None:
            return self.outcome_without_start()
        try:
            config = self.image_config(image)
            # resolving a named user mounts the image: off the event loop; root needs nothing
            user = ROOT
            if config.user:
                user = await self.loop.run_in_executor(
                    self.node.start_pool, self.identity, image, config
                )
        except Exception as exc:
            return RunOutcome(
                message=f"the job's container could not be prepared: {error_text(exc)}"
            )
        if request.volume_ingress or self.job.mounts:
            try:
                # blocking: a volume no other run uses may be resized first (e2fsck, resize2fs)
                await self.loop.run_in_executor(self.node.start_pool, self.claims.claim_volumes)
            except Exception as exc:
                return RunOutcome(
                    message=f"the job's volumes could not be prepared: {error_text(exc)}"
                )
        if request.volume_ingress:
            try:
                await self.loop.run_in_executor(
                    self.node.pull_pool,
                    lambda: fetch_ingress(
                        self.node.volumes,
                        request.workflow_id,
                        request.volume_ingress,
                        secrets.ingress_authorization,
                        secrets.transfer_s3,
                        # the fetched files belong to whom the job runs as
                        owner=(user.uid, user.gid),
                        progress=SinkProgress(request.run_id, self.sink, self.loop),
                        locations=request.volume_locations,
                    ),
                )
            except Exception as exc:
                return RunOutcome(message=error_text(exc))
            if self.stopping is not None:
                return self.outcome_without_start()
        try:
            extra_env = {**await self.rank_environment(config), **secrets.environment()}
            spec = self.container_spec(image, extra_env, config, user)
        except Exception as exc:
            if self.stopping is not None:  # stopped while it waited for other nodes
                return self.outcome_without_start()
            return RunOutcome(
                message=f"the job's container could not be prepared: {error_text(exc)}"
            )
        try:
            await self.launch(
                spec,
                hold_image=True,
                timeout=request.timeout_seconds,
                late_env=token_environment(token) if token is not None else None,
            )
        except Exception as exc:
            return RunOutcome(message=f"the container could not start: {error_text(exc)}")
        return None

    async def rank_environment(self, config: ImageConfig = NO_CONFIG) -> dict[str, str]:
        """Variables the ranks of a multinode part of an image with ``config`` need (none for
        one node); they go over the job's environment."""
        return {}

    def image_config(self, image: Path) -> ImageConfig:
        """The config kept beside the cached ``image``; an empty one, said in the log, for an
        image that has none (converted before configs were kept, or from a source that
        carries none, such as the object cache)."""
        config = self.node.images.config(image)
        if config is None:
            log.info(
                "run %s: image %s (%s) has no config kept beside it; it runs with an empty"
                " config (no Env, Entrypoint, Cmd, WorkingDir or User)",
                self.request.run_id,
                self.job.image.uri,
                image.name,
            )
            return NO_CONFIG
        return config

    def hostname(self) -> str:
        """The container's hostname."""
        return container_hostname(self.request)

    def launch_command(self, command: list[str], binds: list[Bind]) -> list[str]:
        """The container's argv for the step's ``command`` (the same here); may add binds."""
        return command

    def container_spec(
        self,
        image: Path,
        extra_env: dict[str, str],
        config: ImageConfig = NO_CONFIG,
        user: Identity = ROOT,
    ) -> ContainerSpec:
        """The step's container: the job and its image's ``config`` (environment, command,
        working directory) run as ``user`` (:meth:`identity`), volumes, script, files,
        devices, limits."""
        request, job = self.request, self.job
        hostname = self.hostname()
        env = job_environment(request, hostname, config)
        if config.user and "HOME" not in env:
            env["HOME"] = user.home  # as runc sets it for the image's user
        env.update(extra_env)
        binds = volume_binds(self.node, self.claims, request, user)
        script_path = None
        if job.script is not None:
            bind, script_path = script_bind(self.claims, job.script)
            binds.append(bind)
        binds.extend(file_binds(self.claims, job.files or {}))
        command = job_command(job, script_path, config)
        if not command:
            raise FuzzballError(
                "the job sets none of command, args and script, and its image no Entrypoint or Cmd"
            )
        command = self.launch_command(command, binds)
        resources = job_resources(job)
        preparation = prepare_devices(self.node, self.claims, request, dict(resources.devices))
        env.update(preparation.env)
        with_search_paths(env, preparation.search_paths)
        binds.extend(device_binds(preparation))
        report_warnings(self.sink, request.run_id, preparation.warnings)
        if config.env_scripts is None and uri_scheme(job.image.uri) == "oras":
            self.notice(not_looked_for_notice(job.image.uri))
        elif config.env_scripts:
            command = self.sourcing_env_scripts(
                command,
                config,
                # what the job and the platform set wins over the scripts, as Apptainer's
                # --env and APPTAINERENV_ do; the token comes later, at the process's start
                {*job_variable_names(request), *extra_env, *preparation.env, WORKFLOW_TOKEN_ENV},
                env,
                preparation.search_paths,
            )
        cpus, cpuset = cpu_limits(request, resources.cores)
        return ContainerSpec(
            image=image,
            command=command,
            env=env,
            cwd=job_cwd(job, config),
            hostname=hostname,
            uid=user.uid,
            gid=user.gid,
            groups=list(user.groups),
            binds=binds,
            devices=list(preparation.device_paths),
            memory=resources.memory or None,
            cpus=cpus,
            cpuset=cpuset,
            stdin=DEVNULL,
            stdout=PIPE,
            stderr=PIPE,
            metering=self.node.metering,
            metadata_guard=self.node.network.metadata_guard,
            capabilities=self.node.capabilities,
            state_dir=self.node.state_dir,
            isolated=self.node.network.isolation(job),
            extra_hosts=self.extra_hosts(),
            node_ports=self.node.network.node_ports(job),
            keep_cgroups=request.cgroup_key if self.node.keep_cgroups else None,
        )

    def sourcing_env_scripts(
        self,
        command: list[str],
        config: ImageConfig,
        keep: set[str],
        env: dict[str, str],
        search_paths: Mapping[str, list[str]],
    ) -> list[str]:
        """``command`` run after the image's Apptainer environment scripts, the variables
        ``keep`` names exported again over theirs and the device plugins' ``search_paths``
        appended again to theirs (carried in ``env``, which this adds to); ``command``
        itself, said in the run's events and the agent's log (:meth:`notice`), when the
        image has no shell to source them with."""
        if config.env_shell:
            env.update(search_path_carriers(search_paths))
            return sourcing_env_scripts(command, keep, search_paths)
        self.notice(not_applied_notice(config))
        return command

    def notice(self, text: str) -> None:
        """Say ``text`` as a warning event of the run's job (``stage_warning``) and in the
        agent's log."""
        log.warning("run %s: %s", self.request.run_id, text)
        report_warnings(self.sink, self.request.run_id, [text])

    def extra_hosts(self) -> dict[str, str]:
        """The container's extra /etc/hosts entries: the workflow's services'."""
        return self.node.network.hosts(self.request.hosts)

    def identity(self, image: Path, config: ImageConfig) -> Identity:
        """Who the command runs as: the image's ``User`` resolved in the image itself (root
        when it names none), until the submitting user's identity decides."""
        if not config.user:
            return ROOT
        return image_identity(image, config.user, self.node.state_dir)


class ServiceDriver(ContainerJobDriver):
    """A service's container (``services.NAME``): a job's, whose readiness is probed."""

    def __init__(self, request: RunRequest, node: NodeServices, sink: LogSink) -> None:
        super().__init__(request, node, sink)
        self.readiness_probe = readiness_of(self.job)


class MultinodePartDriver(ContainerJobDriver):
    """This node's part of a multinode job or service: its share of the ranks, in one
    container.

    MPICH ranks (and generic ones) find each other through the PMI service this driver
    runs; a generic part also gets torchrun's variables from the run's launch exchange
    (:mod:`fuzzball_core.substrate.rendezvous`). Open MPI's ranks are started by its own
    launcher, ``mpirun`` in part 0, which reaches the other parts through this driver: their
    containers start with part 0's and wait for the daemon ``mpirun`` asks for
    (:mod:`fuzzball_core.substrate.openmpi`)."""

    def __init__(
        self,
        request: RunRequest,
        node: NodeServices,
        sink: LogSink,
        *,
        ranks: RankLayout,
        fence: Fence,
    ) -> None:
        super().__init__(request, node, sink)
        self.ranks = ranks
        self._fence = fence
        self._pmi: PmiService | None = None
        multinode = self.job.multinode
        self.implementation = (multinode.implementation if multinode else None) or "mpich"
        #: every part's node address, once the parts exchanged them (Open MPI, generic)
        self._part_addresses: list[str] = []
        #: part 0 sending the daemons mpirun asks for, or another part handing its container
        #: the daemon it is sent (Open MPI)
        self._launch_exchange: asyncio.Task[None] | None = None
        self._stopped = asyncio.Event()
        #: the node's topology exported for hwloc in the ranks (None: they discover it)
        self._topology: Path | None = None
        # a service may span nodes too; each part is then probed as a service is
        self.readiness_probe = readiness_of(self.job)

    @property
    def open_mpi(self) -> bool:
        """Whether Open MPI's launcher starts this job's ranks."""
        return self.implementation in OPEN_MPI

    async def rank_environment(self, config: ImageConfig = NO_CONFIG) -> dict[str, str]:
        """What this node's ranks need to find each other: Open MPI's settings, else the PMI
        service's variables, plus torchrun's for a generic job; the interfaces named only
        where neither the job's ``env`` nor the image's ``Env`` (``config``) names them. Also
        exports the node's topology for the ranks' hwloc (once per agent process; see
        :mod:`.hwloc`)."""
        env: dict[str, str] = {}
        own = own_variables(self.job, config)
        address = self.node.network.address
        pool = self.node.start_pool
        topology_dir = self.node.state_dir / "hwloc"
        # Both are usually at hand on this loop: the interface from a few ioctls, the topology
        # once this process exported it. A worker thread (pyroute2 runs an event loop of its
        # own, hwloc's discovery blocks) only for an address that is not an interface's
        # primary IPv4 one and for the first export: on a busy node each hop to a thread
        # and back cost milliseconds of the ranks' start.
        interface = primary_interface(address)
        lookup = None
        if interface is None:
            lookup = self.loop.run_in_executor(pool, node_interface, address)
        if hwloc.exported(topology_dir):
            self._topology = hwloc.node_topology(topology_dir)
        else:
            self._topology = await self.loop.run_in_executor(
                pool, hwloc.node_topology, topology_dir
            )
        if lookup is not None:
            interface = await lookup
        if interface is None:
            log.warning(
                "run %s: no interface holds this node's address %r; the job's MPI or"
                " collectives library chooses its own interfaces",
                self.request.run_id,
                address,
            )
        if self.open_mpi or self.implementation == "generic":
            mine = rendezvous.offer(
                self.ranks, self.node.network.address, meeting_point=not self.open_mpi
            )
            exchanged = await self._exchange(ADDRESS_EXCHANGE, mine)
            self._part_addresses = rendezvous.part_addresses(self.ranks, exchanged)
            if not self.open_mpi:
                env.update(rendezvous.environment(self.ranks, exchanged))
        if self.open_mpi:
            env.update(self._open_mpi_environment(interface, own))
            return env
        if interface is not None:
            env.update(transport_environment(interface.name, own))
        self._pmi = PmiService(
            self.ranks,
            f"fuzzball-run-{self.request.run_id}",
            self._fence,
            lambda why: self.stop(StopReason.FAILED, why),
        )
        env.update(self.ranks.environment(await self._pmi.start()))
        return env

    def _open_mpi_environment(
        self, interface: NodeInterface | None, own: frozenset[str]
    ) -> dict[str, str]:
        if len(set(self._part_addresses)) < len(self._part_addresses):
            # mpirun would take another node for itself and wait for it forever
            raise FuzzballError(
                f"the job's nodes share an address ({', '.join(self._part_addresses)}):"
                " Open MPI tells its nodes apart by address; give each node its own"
                " (substrate.address)"
            )
        replaced = sorted(own & openmpi.WIRING.keys())
        if replaced:
            # a job's env entry was warned of at submission; an image's Env is seen only here,
            # so the job's events say it too, not only the agent's log
            self.notice(
                f"{', '.join(replaced)}, set by the job or its image, replaced by Fuzzball's:"
                " Open MPI's launch reaches the other nodes through them"
            )
        subnet = interface.subnet if interface is not None else None
        env = openmpi.environment(subnet, own)
        env.update(
            FB_NODE_INDEX=str(self.ranks.part),
            FB_NODE_COUNT=str(self.ranks.nodes),
            FB_PROCS_PER_NODE=str(self.ranks.procs_per_node),
            FB_NODE_ADDRESSES=",".join(self._part_addresses),
            FB_MULTINODE_IMPLEMENTATION="openmpi",
        )
        return env

    async def _exchange(self, seq: int, mine: dict[str, str]) -> dict[str, str]:
        """Fence ``seq`` of the run outside PMI: what every part offered. A stop meanwhile
        ends the wait (the run then never starts here)."""
        exchange = asyncio.ensure_future(self._fence(seq, mine))
        stopped = asyncio.ensure_future(self._stopped.wait())
        await asyncio.wait((exchange, stopped), return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        if not exchange.done():
            exchange.cancel()
            raise FuzzballError("stopped while waiting for the job's other nodes")
        return exchange.result()

    def hostname(self) -> str:
        """The job's hostname with this part's index (MPI tells the nodes apart by it)."""
        return container_hostname(self.request, self.ranks)

    def part_hostnames(self) -> list[str]:
        """Every part's container hostname, in part order."""
        return [
            container_hostname(self.request, replace(self.ranks, part=part))
            for part in range(self.ranks.nodes)
        ]

    def extra_hosts(self) -> dict[str, str]:
        """The services' entries, and every part's hostname at its node's address when the
        parts exchanged them (Open MPI's daemons and ``mpirun`` find each other by name)."""
        hosts = super().extra_hosts()
        for host, address in zip(self.part_hostnames(), self._part_addresses, strict=False):
            if address:
                hosts[host] = address
        return hosts

    @property
    def awaits_daemon(self) -> bool:
        """Whether this part's container waits for the Open MPI daemon ``mpirun`` asks for
        (every part of an Open MPI job but the first)."""
        return self.open_mpi and self.ranks.part > 0

    def container_spec(
        self,
        image: Path,
        extra_env: dict[str, str],
        config: ImageConfig = NO_CONFIG,
        user: Identity = ROOT,
    ) -> ContainerSpec:
        """The job's container, with the node's topology bound in for hwloc (unless the
        image or the job chooses hwloc's source); one waiting for its daemon reads it from
        standard input."""
        spec = super().container_spec(image, extra_env, config, user)
        if self._topology is not None:
            topology_env = hwloc.environment(spec.env)
            if topology_env:
                spec.env.update(topology_env)
                spec.binds.append(
                    Bind(str(self._topology.parent), hwloc.TOPOLOGY_DIR, readonly=True)
                )
        if self.awaits_daemon:
            spec.stdin = PIPE
        return spec

    def launch_command(self, command: list[str], binds: list[Bind]) -> list[str]:
        """Open MPI: ``mpirun`` around the command in part 0, a shell waiting for the daemon
        it will ask for in the others, with the remote agent bound in. Otherwise several
        ranks on this node start through the rank launcher (bound read-only)."""
        if self.open_mpi:
            return self._open_mpi_command(command, binds)
        if self.ranks.procs_per_node <= 1:
            return command
        launcher = readable_file(self.claims.directory("ranks") / "launch", LAUNCHER_SCRIPT)
        binds.append(Bind(str(launcher.parent), RANKS_DIR, readonly=True))
        first, count = self.ranks.first_rank, self.ranks.procs_per_node
        return ["/bin/sh", f"{RANKS_DIR}/launch", str(first), str(count), *command]

    def _open_mpi_command(self, command: list[str], binds: list[Bind]) -> list[str]:
        agent = readable_file(self.claims.directory("openmpi") / "agent", openmpi.AGENT_SCRIPT)
        agent.chmod(0o755)
        launch_dir = self.claims.directory("openmpi-launch")
        # written by the job's user, whoever its image says that is
        launch_dir.chmod(0o1777)
        binds.append(Bind(str(agent.parent), openmpi.OPENMPI_DIR, readonly=True))
        binds.append(Bind(str(launch_dir), openmpi.LAUNCH_DIR))
        if self.awaits_daemon:
            return list(openmpi.WAITER_COMMAND)
        return openmpi.mpirun_command(self.ranks, self.part_hostnames(), command)

    async def launch(
        self,
        spec: ContainerSpec,
        *,
        hold_image: bool,
        timeout: float | None,
        late_env: Callable[[], Mapping[str, str]] | None = None,
    ) -> None:
        """Start the container; in Open MPI's part 0, then hand the daemons ``mpirun``
        asks for to the other parts, which hand theirs to their waiting containers."""
        await super().launch(spec, hold_image=hold_image, timeout=timeout, late_env=late_env)
        if self.awaits_daemon:
            self._launch_exchange = asyncio.ensure_future(self._receive_daemon())
        elif self.open_mpi and self.ranks.nodes > 1:
            self._launch_exchange = asyncio.ensure_future(self._send_daemons())

    async def _send_daemons(self) -> None:
        process = self.process
        commands = await openmpi.collect_daemon_commands(
            self.claims.directory("openmpi-launch"),
            self.part_hostnames(),
            lambda: process is not None and not process.exited and self.stopping is None,
        )
        if commands is not None:
            log.info(
                "run %s: starting Open MPI's daemons on the job's other nodes", self.request.run_id
            )
            await self._fence(DAEMON_EXCHANGE, commands)

    async def _receive_daemon(self) -> None:
        """Write the daemon's command line, once part 0 sent it, to the waiting shell's
        standard input, and close it (closed without a line when the run stopped first)."""
        process = self.process
        stdin = process.handle.stdin if process is not None else None
        if stdin is None:
            return
        try:
            commands = await self._exchange(DAEMON_EXCHANGE, {})
            data = openmpi.daemon_input(commands[openmpi.daemon_key(self.ranks.part)])
            log.info("run %s: starting Open MPI's daemon", self.request.run_id)
            # a line of a few KiB fits the pipe's buffer: written at once, on the loop
            os.set_blocking(stdin.fileno(), False)
            if os.write(stdin.fileno(), data) < len(data):
                raise BlockingIOError
        except BlockingIOError:
            self.stop(StopReason.FAILED, "Open MPI's daemon command line was cut short")
        except FuzzballError:
            pass  # stopped before part 0's mpirun asked
        except KeyError:
            self.stop(StopReason.FAILED, "mpirun asked for no daemon on this part's node")
        except OSError as exc:  # the container ended meanwhile
            log.info("run %s: the daemon's line was not delivered: %s", self.request.run_id, exc)
        finally:
            with contextlib.suppress(OSError):
                stdin.close()

    def _on_stop(self) -> None:
        self._stopped.set()
        super()._on_stop()

    def _container_ended(self) -> None:
        self._close_pmi()

    def destroy(self) -> None:
        """Stop serving PMI and launching daemons, then free what the run held."""
        self._close_pmi()
        if self._launch_exchange is not None:
            self._launch_exchange.cancel()
            self._launch_exchange = None
        super().destroy()

    def _close_pmi(self) -> None:
        if self._pmi is not None:
            self._pmi.close()
            self._pmi = None


def readiness_of(step: Job | Service) -> Probe | None:
    """A service's readiness probe (None for a job, or a service without one)."""
    return step.readiness_probe if isinstance(step, Service) else None


def token_environment(
    token: asyncio.Future[RunSecrets | RunOutcome],
) -> Callable[[], Mapping[str, str]]:
    """What a container-start thread calls, just before the container's process is created,
    for the variables ``token`` (an answer still on its way on the event loop) brings: it
    blocks that thread until the answer came. A run that needs no secret starts without its
    token when Orchestrate could not be asked, as :meth:`TaskDriver.secrets` says."""
    answered: concurrent.futures.Future[dict[str, str]] = concurrent.futures.Future()

    def settle(done: asyncio.Future[RunSecrets | RunOutcome]) -> None:
        if done.cancelled():
            answered.cancel()
        elif (error := done.exception()) is not None:
            answered.set_exception(error)
        else:
            secrets = done.result()
            answered.set_result(secrets.environment() if isinstance(secrets, RunSecrets) else {})

    token.add_done_callback(settle)
    return answered.result
