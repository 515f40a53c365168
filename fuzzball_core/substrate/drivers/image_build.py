"""The driver of an image stage's build (payload kind ``image-build``).

The base image is pulled, the definition's ``files`` are written into the container's
writable layer (a scratch directory of the run), and the ``post`` script runs as root in a
container on the host's network, as a Dockerfile's ``RUN`` runs over its ``FROM``: with the
base's Env (the default PATH only when it sets none; HOME root's passwd entry's unless it
sets one) in its WorkingDir (created when the base lacks it, and so kept in the built
image). When it succeeds the layer is sealed onto the base into an EROFS file
(:mod:`fuzzball_core.substrate.image_builds`) and stored through the storing image backend
at the payload's ``target``, with its base's config (a build's ``post`` changes files, not
how the image runs), kept beside it for the backend to store as well.
"""

from __future__ import annotations

from pathlib import Path

from fuzzball_core.drivers import ImageConfig
from fuzzball_core.substrate import image_builds
from fuzzball_core.substrate.drivers.base import (
    LogSink,
    NodeServices,
    RunOutcome,
    RunRequest,
    error_text,
)
from fuzzball_core.substrate.drivers.containers import ContainerDriver
from fuzzball_core.substrate.drivers.image_progress import ImageProgress
from fuzzball_core.substrate.drivers.steps import (
    NO_CONFIG,
    container_hostname,
    image_cwd,
    image_environment,
)
from fuzzball_core.substrate.images import describe_pull_failure
from fuzzball_runtime import DEVNULL, PIPE, ContainerSpec


class ImageBuildDriver(ContainerDriver):
    """Builds an image from a base and a ``post`` script, then stores it."""

    def __init__(self, request: RunRequest, node: NodeServices, sink: LogSink) -> None:
        super().__init__(request, node, sink)
        self.progress = ImageProgress(request.run_id, sink, self.loop)
        #: the base image's EROFS file, once pulled
        self._base: Path | None = None

    async def start(self) -> RunOutcome | None:
        """Pull the base, then start the ``post`` script's container."""
        work = self.request.definition
        base_uri = str(work["from"]["uri"])
        digest = str(work["from"].get("digest") or "")
        secrets = await self.secrets(bool(work["from"].get("secret")))
        if isinstance(secrets, RunOutcome):
            return secrets
        try:
            base = await self.loop.run_in_executor(
                self.node.pull_pool,
                lambda: self.node.images.ensure(
                    base_uri,
                    digest=digest,
                    progress=self.progress.step,
                    credentials=secrets.image_credentials or None,
                ),
            )
        except Exception as exc:
            return RunOutcome(message=describe_pull_failure(base_uri, exc))
        self._base = base
        scratch = self.claims.directory("scratch")
        try:
            image_builds.write_files(scratch / "upper", work.get("files") or {})
            config = self.node.images.config(base) or NO_CONFIG
            spec = ContainerSpec(
                image=base,
                command=["/bin/sh", "-c", str(work.get("post") or "true")],
                env=image_environment(config),
                cwd=image_cwd(config),
                hostname=container_hostname(self.request),
                # the host's network: package installs need it; everything else is confined
                network=False,
                metadata_guard=self.node.network.metadata_guard,
                capabilities=self.node.capabilities,
                stdin=DEVNULL,
                stdout=PIPE,
                stderr=PIPE,
                state_dir=self.node.state_dir,
                scratch_dir=scratch,
            )
            # a base is used by its build alone: it is not kept mounted for later runs
            await self.launch(spec, hold_image=False, timeout=None)
        except Exception as exc:
            return RunOutcome(message=f"the build's container could not start: {error_text(exc)}")
        return None

    async def _after_container(self, outcome: RunOutcome) -> RunOutcome:
        """A ``post`` script that succeeded is sealed into the image and stored."""
        if outcome.exit_code != 0 or self.stopping is not None:
            return outcome
        return await self.loop.run_in_executor(self.node.pull_pool, self._seal_and_store)

    def _seal_and_store(self) -> RunOutcome:
        assert self._base is not None, "a build's container ran without its base"
        try:
            store = self.node.images.store()
            problem = store.store_unavailable()
        except Exception as exc:
            problem = error_text(exc)
        if problem is not None:
            return RunOutcome(message=f"{problem}: the built image has nowhere to go")
        out = self.claims.run_dir / "image.erofs"
        try:
            self.progress.step("convert", 0, 1)
            image_builds.seal(self._base, self.claims.run_dir / "scratch", out)
            base_config = ImageConfig.read_beside(self._base)
            if base_config is not None:
                base_config.write_beside(out)
            self.progress.step("convert", 1, 1)
            store.store(self.request.definition["target"], out, progress=self.progress.step)
        except Exception as exc:
            return RunOutcome(message=f"the built image could not be stored: {error_text(exc)}")
        self.progress.step("done", 1, 1)
        return RunOutcome(exit_code=0)
