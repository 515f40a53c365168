"""The driver of an image stage's pull (payload kind ``image-pull``).

The image is made ready in the node's cache on the pull thread pool (from the object cache's
copy when the payload names one, ``cached``), its steps reported as progress (an image this
agent made ready at the payload's digest before is taken at once, on the loop); when the
payload names a write-back target the image is then stored there through the storing image
backend (best effort: the pull succeeds either way). Nothing runs in a container, so a stop
only keeps the write-back from starting or retrying.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fuzzball_core.errors import FuzzballError
from fuzzball_core.substrate.drivers.base import (
    LogSink,
    NodeServices,
    PoolTaskDriver,
    RunOutcome,
    RunRequest,
)
from fuzzball_core.substrate.drivers.image_progress import ImageProgress
from fuzzball_core.substrate.image_write_back import (
    DEFAULT_STALL_SECONDS,
    WriteBack,
    abandon,
    write_back,
)
from fuzzball_core.substrate.images import describe_pull_failure


class ImagePullDriver(PoolTaskDriver):
    """Pulls an image stage's image into the node cache, then writes it back if asked."""

    def __init__(self, request: RunRequest, node: NodeServices, sink: LogSink) -> None:
        super().__init__(request, node, sink)
        self.progress = ImageProgress(request.run_id, sink, self.loop)
        #: the node has the image at the stage's digest: nothing to pull
        self._ready = False

    async def start(self) -> RunOutcome | None:
        """Begin the pull in the background (its outcome comes from :meth:`wait`), with the
        registry credentials of the image's ``secret`` when it names one."""
        secrets = await self.secrets(bool(self.request.definition.get("secret")))
        if isinstance(secrets, RunOutcome):
            return secrets
        credentials = secrets.image_credentials or None
        work = self.request.definition
        if not isinstance(work.get("write-back"), dict):
            ready = self.node.images.ready(str(work["uri"]), str(work.get("digest") or ""))
            if ready is not None:
                # Nothing to pull (the usual image stage of a cached image): no hop to the
                # pull pool and back, and the run's start, progress and exit reach the stream
                # on one turn of the loop, in one write.
                self._ready = True
                return None
        # the pull checks `stopping` before each write-back attempt
        self.begin(self._pull, credentials)
        return None

    async def wait(self) -> RunOutcome:
        """The pull's outcome (at once for an image the node has at its digest)."""
        if self._ready:
            self.progress.done_on_loop()
            return RunOutcome(exit_code=0)
        return await super().wait()

    def destroy(self) -> None:
        """A pull holds nothing of its own on the node (the image stays in the cache)."""

    def _pull(self, credentials: Mapping[str, str] | None) -> RunOutcome:
        work = self.request.definition
        uri = str(work["uri"])
        try:
            image = self.node.images.ensure(
                uri,
                digest=str(work.get("digest") or ""),
                cached=str(work.get("cached") or ""),
                progress=self.progress.step,
                credentials=credentials,
            )
        except Exception as exc:
            return RunOutcome(message=describe_pull_failure(uri, exc))
        target = work.get("write-back")
        if isinstance(target, dict) and self.stopping is None:
            self._write_back(image, target)
        return RunOutcome(exit_code=0)

    def _write_back(self, image: Path, target: dict[str, Any]) -> None:
        config = self.node.images.images_config
        try:
            store = self.node.images.store()
        except FuzzballError as exc:
            abandon(self.progress.document, image.stat().st_size, exc.message)
            return
        plan = WriteBack(
            store=store,
            target=target,
            stall=float(config.get("cache-write-back-stall") or DEFAULT_STALL_SECONDS),
        )
        write_back(image, plan, self.progress.document, stopped=lambda: self.stopping is not None)
