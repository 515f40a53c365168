"""The drivers of a workflow's own steps: a job's container, a service's, and a node's part
of a multinode job or service.

All three pull the step's image, fetch its volume ingress and start one container built by
:meth:`ContainerJobDriver.container_spec` from the job and the image's config (kept beside
the cached image; see :mod:`fuzzball_core.substrate.drivers.steps` for how each part
applies); a service is also probed for readiness, and a multinode part serves PMI to its
ranks and starts them through the rank launcher.
"""

from __future__ import annotations

import logging
from pathlib import Path

from fuzzball_core.drivers import ImageConfig
from fuzzball_core.errors import FuzzballError
from fuzzball_core.spec.models import Job, Probe, Service
from fuzzball_core.spec.resources import job_resources
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
    file_binds,
    job_command,
    job_cwd,
    job_environment,
    prepare_devices,
    readable_file,
    script_bind,
    volume_binds,
)
from fuzzball_core.substrate.images import describe_pull_failure
from fuzzball_core.substrate.ingress import fetch_ingress
from fuzzball_core.substrate.pmi import Fence, PmiService
from fuzzball_core.substrate.ranks import LAUNCHER_SCRIPT, RankLayout
from fuzzball_core.substrate.run_secrets import references_secrets
from fuzzball_runtime import DEVNULL, PIPE, Bind, ContainerSpec
from fuzzball_runtime.users import Identity, image_identity

log = logging.getLogger("fuzzball.substrate")
#: who a job runs as when its image names no user
ROOT = Identity(0, 0)

#: where the launcher of a node's several ranks is bound in a multinode job's container
RANKS_DIR = "/.fuzzball-ranks"


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
        secrets = await self.secrets(references_secrets(self.job.env, image_spec.secret))
        if isinstance(secrets, RunOutcome):
            return secrets
        try:
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
        if request.volume_ingress:
            self.claims.claim_volumes()
            try:
                await self.loop.run_in_executor(
                    self.node.pull_pool,
                    fetch_ingress,
                    self.node.volumes,
                    request.workflow_id,
                    request.volume_ingress,
                )
            except Exception as exc:
                return RunOutcome(message=error_text(exc))
            if self.stopping is not None:
                return self.outcome_without_start()
        try:
            config = self.image_config(image)
            # resolving the user mounts the image: off the event loop
            user = await self.loop.run_in_executor(
                self.node.start_pool, self.identity, image, config
            )
            extra_env = {**await self.rank_environment(), **secrets.environment()}
            spec = self.container_spec(image, extra_env, config, user)
        except Exception as exc:
            return RunOutcome(
                message=f"the job's container could not be prepared: {error_text(exc)}"
            )
        try:
            await self.launch(spec, hold_image=True, timeout=request.timeout_seconds)
        except Exception as exc:
            return RunOutcome(message=f"the container could not start: {error_text(exc)}")
        return None

    async def rank_environment(self) -> dict[str, str]:
        """Variables the ranks of a multinode part need (none for one node)."""
        return {}

    def image_config(self, image: Path) -> ImageConfig:
        """The config kept beside the cached ``image``; an empty one, said in the log, for an
        image that has none (converted before configs were kept, or from a source that
        carries none, such as the object cache)."""
        config = ImageConfig.read_beside(image)
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
        binds.extend(Bind(src, dst) for src, dst in preparation.binds)
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
            state_dir=self.node.state_dir,
            isolated=self.node.network.isolation(job),
            extra_hosts=self.node.network.hosts(request.hosts),
            node_ports=self.node.network.node_ports(job),
        )

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
    container, finding each other through the PMI service this driver runs."""

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
        # a service may span nodes too; each part is then probed as a service is
        self.readiness_probe = readiness_of(self.job)

    async def rank_environment(self) -> dict[str, str]:
        """Serve PMI to this node's ranks; the variables they find it by."""
        self._pmi = PmiService(
            self.ranks,
            f"fuzzball-run-{self.request.run_id}",
            self._fence,
            lambda why: self.stop(StopReason.FAILED, why),
        )
        return self.ranks.environment(await self._pmi.start())

    def hostname(self) -> str:
        """The job's hostname with this part's index (MPI tells the nodes apart by it)."""
        return container_hostname(self.request, self.ranks)

    def launch_command(self, command: list[str], binds: list[Bind]) -> list[str]:
        """Several ranks on this node start through the rank launcher (bound read-only)."""
        if self.ranks.procs_per_node <= 1:
            return command
        launcher = readable_file(self.claims.directory("ranks") / "launch", LAUNCHER_SCRIPT)
        binds.append(Bind(str(launcher.parent), RANKS_DIR, readonly=True))
        first, count = self.ranks.first_rank, self.ranks.procs_per_node
        return ["/bin/sh", f"{RANKS_DIR}/launch", str(first), str(count), *command]

    def _container_ended(self) -> None:
        self._close_pmi()

    def destroy(self) -> None:
        """Stop serving PMI, then free what the run held."""
        self._close_pmi()
        super().destroy()

    def _close_pmi(self) -> None:
        if self._pmi is not None:
            self._pmi.close()
            self._pmi = None


def readiness_of(step: Job | Service) -> Probe | None:
    """A service's readiness probe (None for a job, or a service without one)."""
    return step.readiness_probe if isinstance(step, Service) else None
