"""The driver of a volume egress stage's run (payload kind ``volume-egress``).

Orchestrate starts it once every job and service mounting the volume has ended, on the node
holding the volume's data. It asks for the run's secrets (each destination's s3 secret, by
``VOLUME/egress/INDEX``), finds the volume where its storage driver keeps it, and sends each
transfer with :func:`~fuzzball_core.substrate.egress.send_egress` on the pull thread pool,
its progress reported on the run's ``progress`` stream (``volume_transfer`` events). Nothing
runs in a container. A stop cannot interrupt boto3 mid-object: the transfer under way ends,
no later one starts, and the run reports the stop.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from fuzzball_core.drivers import VolumeLocation
from fuzzball_core.substrate.drivers.base import (
    LogSink,
    NodeServices,
    PoolTaskDriver,
    RunOutcome,
    RunRequest,
    error_text,
)
from fuzzball_core.substrate.egress import send_egress
from fuzzball_core.substrate.s3_transfer import S3Credentials
from fuzzball_core.substrate.transfer_progress import SinkProgress


class VolumeEgressDriver(PoolTaskDriver):
    """Sends a volume's egress files to their destinations."""

    def __init__(self, request: RunRequest, node: NodeServices, sink: LogSink) -> None:
        super().__init__(request, node, sink)
        self._claimed = False
        self._taken: list[VolumeLocation] = []

    @property
    def volume(self) -> str:
        """The volume whose files are sent."""
        return str(self.request.definition.get("volume", ""))

    @property
    def transfers(self) -> list[Mapping[str, Any]]:
        """The transfers of the payload: {source, destination, secret?, retries?}."""
        return list(self.request.definition.get("transfers") or ())

    async def start(self) -> RunOutcome | None:
        """Ask for the destinations' credentials and begin sending in the background (the
        outcome comes from :meth:`wait`)."""
        needed = any(transfer.get("secret") for transfer in self.transfers)
        secrets = await self.secrets(needed)
        if isinstance(secrets, RunOutcome):
            return secrets
        if self.stopping is not None:
            return self.outcome_without_start()
        # the workflow's volumes stay on this node while its egress reads them
        self.node.volumes.acquire(self.request.workflow_id)
        self._claimed = True
        self.started_at = time.time()
        # boto3's transfer cannot be interrupted; _send checks `stopping` between transfers
        self.begin(self._send, dict(secrets.transfer_s3))
        return None

    def destroy(self) -> None:
        """Let the workflow's volumes expire on this node again (and no longer count this run
        among the volume's users)."""
        if self._claimed:
            self._claimed = False
            self.node.volumes.let_go(self._taken)
            self._taken = []
            self.node.volumes.release(self.request.workflow_id, time.time())

    def _send(self, s3: dict[str, S3Credentials]) -> RunOutcome:
        request = self.request
        volume = self.volume
        progress = SinkProgress(request.run_id, self.sink, self.loop)
        try:
            location = request.volume_locations.get(volume)
            # counted among the volume's users while it is read: nothing resizes it meanwhile
            self._taken = self.node.volumes.take([location] if location else [])
            directory = self.node.volumes.locate(request.workflow_id, volume, location)
            send_egress(
                directory,
                volume,
                self.transfers,
                s3,
                progress=progress,
                stopped=lambda: self.stopping is not None,
            )
        except Exception as exc:
            return RunOutcome(message=error_text(exc))
        return RunOutcome(exit_code=0)
