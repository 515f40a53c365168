"""Volume ingress on a node: the files a job's mounted volumes start with, fetched once.

Every node that runs a job mounting a volume with an ``ingress`` fetches it into the
volume (where its storage driver keeps it, ``WorkflowVolumes.locate``) before the first such
job of the workflow starts there; later jobs of the workflow on that node find the
workflow's marker and start at once, and jobs starting together wait for one fetch.
Sources are HTTP(S) URLs and ``s3://BUCKET/KEY`` objects (:mod:`.s3_transfer`; Orchestrate
refuses others at submission).
Each download streams into a temporary file of its own beside its destination and is renamed
into place, so a job never sees half a file, and two fetches into one destination (two
workflows filling one persistent volume, two nodes filling a shared one) never write into one
file: the destination ends as one of them whole. A transfer whose ``policy.retry.attempts`` is N is
tried again up to N times (``retries`` in the transfer) before the run fails naming it.
Destinations are resolved inside the volume's directory, symlinks included, so no
destination writes outside it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from fuzzball_core.drivers import VolumeLocation
from fuzzball_core.errors import Unavailable
from fuzzball_core.substrate import s3_transfer
from fuzzball_core.substrate.s3_transfer import S3Credentials, TransferReport
from fuzzball_core.substrate.transfer_progress import TransferReporter
from fuzzball_core.substrate.volumes import WorkflowVolumes
from fuzzball_runtime.layers import resolve_in_root

log = logging.getLogger(__name__)

#: seconds without progress before a download is given up
READ_TIMEOUT = 60.0
CHUNK = 1 << 20

_locks: dict[Path, threading.Lock] = {}
_locks_guard = threading.Lock()


def fetch_ingress(
    volumes: WorkflowVolumes,
    workflow_id: str,
    ingress: Mapping[str, Sequence[Mapping[str, Any]]],
    authorization: Mapping[str, str] | None = None,
    s3: Mapping[str, S3Credentials] | None = None,
    *,
    owner: tuple[int, int] | None = None,
    progress: TransferReporter | None = None,
    locations: Mapping[str, VolumeLocation] | None = None,
) -> None:
    """Fill each volume in ``ingress`` (volume -> [{source, destination, secret?,
    retries?}]) unless this node already did; an http(s) source with a secret is fetched
    with its ``Authorization`` header from ``authorization``, an s3 one with its credentials
    from ``s3`` (both by ``VOLUME/INDEX``, resolved by Orchestrate as the run started).
    With ``owner`` (uid, gid: whom the job runs as), each fetched file and the directories
    made for it belong to them. Each transfer reports its bytes to ``progress`` as they
    move, and its size and time once done. Raises :class:`Unavailable` naming the transfer
    that failed. A volume with a location (``locations``: its storage class's driver) is
    filled where the driver keeps it; the marker saying it was filled is the workflow's, so
    a persistent volume gets each workflow's ingress."""
    for volume, transfers in ingress.items():
        location = (locations or {}).get(volume)
        directory = volumes.locate(workflow_id, volume, location)
        markers = volumes.workflow_dir(workflow_id) / "ingress-done"
        markers.mkdir(parents=True, exist_ok=True)
        marker = markers / volume
        with _lock_for(marker):
            if marker.exists():
                continue
            room = VolumeRoom.of(directory, location, volume_field(volume))
            for index, transfer in enumerate(transfers):
                key = f"{volume}/{index}"
                field = f"{volume_field(volume)}.ingress[{index}]"
                attempts = 1 + max(0, int(transfer.get("retries", 0)))
                for attempt in range(1, attempts + 1):
                    try:
                        target = destination_in(directory, transfer["destination"])
                        made = _missing_parents(directory, target)
                        url = shown_url(transfer["source"])
                        moving = progress_callback(progress, field, url)
                        if transfer["source"].startswith(s3_transfer.SCHEME):
                            report = s3_transfer.download(
                                transfer["source"],
                                target,
                                (s3 or {}).get(key, S3Credentials()),
                                field=field,
                                progress=moving,
                                room=room.left(target),
                            )
                        else:
                            header = (authorization or {}).get(key)
                            report = _fetch(
                                target, transfer, field, header, moving, room.left(target)
                            )
                        room.took(report.bytes)
                        if progress is not None:
                            progress.ended(field, url, report.bytes, report.seconds)
                        if owner is not None:
                            for path in (*made, target):
                                os.chown(path, *owner, follow_symlinks=False)
                        break
                    except Unavailable as exc:
                        if attempt == attempts:
                            raise
                        log.warning("%s (attempt %d of %d)", exc.message, attempt, attempts)
            marker.touch()


class VolumeRoom:
    """How many more bytes ingress may put in a volume: its storage class's capacity less
    what it holds (counted once, before its first transfer), or unlimited."""

    def __init__(self, capacity: int, held: int, field: str) -> None:
        self.capacity = capacity
        self.held = held
        self.field = field

    @classmethod
    def of(cls, directory: Path, location: VolumeLocation | None, field: str) -> VolumeRoom:
        """The room in ``directory`` for ``location``'s capacity (none: unlimited)."""
        capacity = location.capacity_bytes if location is not None else 0
        return cls(capacity, bytes_held(directory) if capacity else 0, field)

    def left(self, replacing: Path) -> int | None:
        """Bytes a transfer to ``replacing`` may bring (what it replaces is given back);
        None: no limit."""
        if not self.capacity:
            return None
        replaced = replacing.stat().st_size if replacing.is_file() else 0
        return max(0, self.capacity - self.held + replaced)

    def took(self, size: int) -> None:
        """A transfer brought ``size`` bytes."""
        self.held += size


def bytes_held(directory: Path) -> int:
    """The bytes of the files under ``directory`` (links not followed)."""
    total = 0
    for root, _dirs, files in os.walk(directory):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:  # removed while counted
                continue
    return total


def volume_field(volume: str) -> str:
    """The spec path of volume ``volume`` (``volumes.NAME``), as errors name it."""
    return f"volumes.{volume}"


def destination_in(directory: Path, destination: str) -> Path:
    """Where ``destination`` (a path inside the volume) is, resolved inside ``directory``
    with symlinks followed as if ``directory`` were ``/``: ``../`` and a link pointing out
    both end inside it."""
    return resolve_in_root(directory, "/" + destination.lstrip("/"))


def _lock_for(marker: Path) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(marker, threading.Lock())


def progress_callback(
    progress: TransferReporter | None, field: str, url: str
) -> s3_transfer.Progress | None:
    """The per-chunk callback reporting ``field``'s bytes to ``progress``."""
    if progress is None:
        return None
    return lambda done, total: progress.moving(field, url, done, total)


def _missing_parents(directory: Path, target: Path) -> list[Path]:
    """The directories between ``directory`` and ``target`` that do not exist yet."""
    missing = []
    for parent in target.parents:
        if parent == directory or not parent.is_relative_to(directory):
            break
        if not parent.exists():
            missing.append(parent)
    return missing


def _fetch(
    target: Path,
    transfer: Mapping[str, Any],
    field: str,
    authorization: str | None = None,
    progress: s3_transfer.Progress | None = None,
    room: int | None = None,
) -> TransferReport:
    source = transfer["source"]
    started = time.monotonic()
    done = 0
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = s3_transfer.temporary_beside(target)
    timeout = httpx.Timeout(READ_TIMEOUT, connect=15.0)
    try:
        # httpx drops Authorization on a redirect to another origin: the credentials go to
        # the source's host only
        headers = {"Authorization": authorization} if authorization else {}
        with httpx.stream(
            "GET", source, headers=headers, follow_redirects=True, timeout=timeout
        ) as response:
            if response.status_code != 200:
                raise Unavailable(
                    f"{field}: could not fetch {shown_url(source)}: HTTP {response.status_code}"
                )
            length = response.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            if room is not None and total is not None and total > room:
                raise s3_transfer.over_capacity(field, shown_url(source), total, room)
            with partial.open("wb") as out:
                for chunk in response.iter_bytes(CHUNK):
                    out.write(chunk)
                    done += len(chunk)
                    if room is not None and done > room:  # no (or a false) Content-Length
                        raise s3_transfer.over_capacity(field, shown_url(source), done, room)
                    if progress is not None:
                        progress(done, total)
    except httpx.HTTPError as exc:
        partial.unlink(missing_ok=True)
        reason = type(exc).__name__ if not str(exc) else str(exc)
        raise Unavailable(f"{field}: could not fetch {shown_url(source)}: {reason}") from None
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    partial.replace(target)
    return TransferReport(done, time.monotonic() - started)


def shown_url(url: str) -> str:
    """``url`` as errors may show it: no credentials, no query (signed URLs carry tokens)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))
