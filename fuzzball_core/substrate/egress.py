"""Volume egress on a node: files of a volume sent to ``s3://BUCKET/KEY`` destinations.

Each transfer's source is ``file://PATH`` inside the volume, resolved inside the volume's
directory with symbolic links followed as if it were ``/``: a job that leaves a link to a
host file (``/etc/shadow``) in its volume gets the file at that path inside the volume sent,
or a failure naming the transfer, never the host's file. Transfers are tried again per
``retries`` (``policy.retry.attempts``) and report progress as ingress does.

What this module does not decide is *when*: Orchestrate schedules a volume's egress stage
(``volumes.NAME.egress``) once every job and service mounting the volume has ended, on the
node holding its data, and Substrate's ``VolumeEgressDriver`` calls :func:`send_egress`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from fuzzball_core.errors import Unavailable
from fuzzball_core.substrate import s3_transfer
from fuzzball_core.substrate.ingress import (
    destination_in,
    progress_callback,
    shown_url,
    volume_field,
)
from fuzzball_core.substrate.s3_transfer import S3Credentials, TransferReport
from fuzzball_core.substrate.transfer_progress import TransferReporter

log = logging.getLogger(__name__)

#: links followed to reach a source file before it is refused
MAX_LINKS = 40


def send_egress(
    directory: Path,
    volume: str,
    transfers: Sequence[Mapping[str, Any]],
    s3: Mapping[str, S3Credentials] | None = None,
    *,
    progress: TransferReporter | None = None,
    stopped: Callable[[], bool] | None = None,
) -> list[TransferReport]:
    """Send each of ``transfers`` ({source: PATH in the volume, destination: s3://...,
    retries?}) of ``volume`` (whose files are in ``directory``), with the credentials in
    ``s3`` by ``VOLUME/egress/INDEX``; what each moved. Raises :class:`Unavailable` naming
    the transfer that failed. Once ``stopped()`` answers true no further transfer or
    attempt starts (one under way cannot be interrupted)."""
    reports = []
    for index, transfer in enumerate(transfers):
        if stopped is not None and stopped():
            break
        field = f"{volume_field(volume)}.egress[{index}]"
        destination = str(transfer["destination"])
        if not destination.startswith(s3_transfer.SCHEME):
            raise Unavailable(f"{field}: only s3:// destinations can be sent to")
        source = file_in(directory, str(transfer["source"]), field)
        url = shown_url(destination)
        credentials = (s3 or {}).get(f"{volume}/egress/{index}", S3Credentials())
        attempts = 1 + max(0, int(transfer.get("retries", 0)))
        for attempt in range(1, attempts + 1):
            try:
                report = s3_transfer.upload(
                    source,
                    destination,
                    credentials,
                    field=field,
                    progress=progress_callback(progress, field, url),
                )
                break
            except Unavailable as exc:
                if attempt == attempts or (stopped is not None and stopped()):
                    raise
                log.warning("%s (attempt %d of %d)", exc.message, attempt, attempts)
        if progress is not None:
            progress.ended(field, url, report.bytes, report.seconds)
        reports.append(report)
    return reports


def file_in(directory: Path, path: str, field: str) -> Path:
    """The file ``path`` names inside ``directory``, every link (the last component's too)
    followed inside it; Unavailable naming ``field`` past :data:`MAX_LINKS` links."""
    found = destination_in(directory, path)
    for _ in range(MAX_LINKS):
        if not found.is_symlink():
            return found
        link = found.readlink()
        # a relative link is relative to the link's own directory, inside the volume
        base = "" if link.is_absolute() else str(found.parent.relative_to(directory))
        found = destination_in(directory, f"{base}/{link}")
    raise Unavailable(f"{field}: {path}: too many levels of symbolic links")
