"""Moving one file between a volume and an S3 bucket (``s3://BUCKET/KEY``) on a node.

The credentials are an s3 secret's fields, resolved by Orchestrate as the run starts
(``RunSecretsResponse.transfer_s3``) and held only in memory here; without a secret the
request is unsigned (a public bucket) rather than signed with whatever credentials the node
itself might hold. Transfers go through boto3's transfer manager (the same code path as
``aws s3 cp``: ranged parts in parallel), into a temporary file beside the destination that is
renamed into place, so a job never sees half a file. Each transfer logs its progress and
returns the bytes moved and the time it took.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
from boto3.exceptions import S3UploadFailedError
from boto3.s3.transfer import TransferConfig
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from fuzzball_core.errors import FailedPrecondition, InvalidArgument, Unavailable

log = logging.getLogger(__name__)

SCHEME = "s3://"
#: seconds between two progress lines of one transfer
PROGRESS_EVERY = 5.0
#: boto3's transfer manager settings: the ones ``aws s3 cp`` uses by default
TRANSFER = TransferConfig(multipart_chunksize=8 << 20, max_concurrency=10)

_SESSION = boto3.session.Session()
_SESSION_LOCK = threading.Lock()

#: called with (bytes so far, total bytes or None) as a transfer advances
Progress = Callable[[int, int | None], None]


@dataclass(frozen=True)
class S3Location:
    """A bucket and key, from ``s3://BUCKET/KEY``."""

    bucket: str
    key: str

    @classmethod
    def parse(cls, uri: str) -> S3Location:
        """``uri``'s bucket and key; InvalidArgument when it names no object."""
        bucket, _, key = uri.removeprefix(SCHEME).partition("/")
        if not uri.startswith(SCHEME) or not bucket or not key.strip("/"):
            raise InvalidArgument(f"{uri!r} is not s3://BUCKET/KEY")
        return cls(bucket, key)

    def __str__(self) -> str:
        return f"{SCHEME}{self.bucket}/{self.key}"


@dataclass(frozen=True)
class S3Credentials:
    """An s3 secret's fields; ``repr`` never shows the keys."""

    access_key_id: str = field(default="", repr=False)
    secret_access_key: str = field(default="", repr=False)
    region: str = ""
    endpoint: str = ""
    session_token: str = field(default="", repr=False)

    def client(self) -> Any:
        """A boto3 S3 client signing with these credentials (unsigned when there are none),
        at the secret's endpoint (AWS's when it names none)."""
        signed = bool(self.access_key_id)
        config = Config(
            retries={"max_attempts": 3, "mode": "standard"},
            signature_version=None if signed else UNSIGNED,
            max_pool_connections=TRANSFER.max_request_concurrency,
        )
        # one session for every client: a new one would load botocore's service models again
        # (a tenth of a second each time); client creation from it is not thread-safe
        with _SESSION_LOCK:
            return _SESSION.client(
                "s3",
                aws_access_key_id=self.access_key_id or None,
                aws_secret_access_key=self.secret_access_key or None,
                aws_session_token=self.session_token or None,
                region_name=self.region or "us-east-1",
                endpoint_url=self.endpoint or None,
                config=config,
            )


@dataclass(frozen=True)
class TransferReport:
    """What one transfer moved and how long it took."""

    bytes: int
    seconds: float


class _Meter:
    """Counts bytes for boto3's callback (called from its worker threads) and logs progress
    every :data:`PROGRESS_EVERY` seconds."""

    def __init__(self, what: str, total: int | None, progress: Progress | None) -> None:
        self.what, self.total, self.progress = what, total, progress
        self.done = 0
        self._lock = threading.Lock()
        self._last = time.monotonic()

    def __call__(self, amount: int) -> None:
        with self._lock:
            self.done += amount
            now = time.monotonic()
            due = now - self._last >= PROGRESS_EVERY
            if due:
                self._last = now
        if self.progress is not None:
            self.progress(self.done, self.total)
        if due:
            of = f" of {self.total}" if self.total is not None else ""
            log.info("%s: %d%s bytes", self.what, self.done, of)


def over_capacity(field: str, shown: str, size: int, room: int) -> FailedPrecondition:
    """The error of a transfer of ``size`` bytes into a volume with ``room`` bytes left by
    its storage class's capacity."""
    return FailedPrecondition(
        f"{field}: {shown} is {size} bytes but the volume's storage class capacity leaves "
        f"{room} bytes"
    )


def download(
    source: str,
    target: Path,
    credentials: S3Credentials,
    *,
    field: str,
    progress: Progress | None = None,
    room: int | None = None,
) -> TransferReport:
    """Fetch ``source`` (``s3://BUCKET/KEY``) into ``target``; Unavailable naming ``field``
    and the object when it cannot be read or does not fit on ``target``'s filesystem,
    FailedPrecondition when it is larger than ``room`` (the bytes the volume's capacity
    leaves; None: no capacity)."""
    location = S3Location.parse(source)
    client = credentials.client()
    started = time.monotonic()
    try:
        size = int(client.head_object(Bucket=location.bucket, Key=location.key)["ContentLength"])
    except (BotoCoreError, ClientError) as exc:
        raise Unavailable(f"{field}: could not fetch {location}: {_reason(exc)}") from None
    if room is not None and size > room:
        raise over_capacity(field, str(location), size, room)
    target.parent.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(target.parent).free
    if size > free:
        raise Unavailable(
            f"{field}: {location} is {size} bytes but the volume has {free} bytes free"
        )
    partial = temporary_beside(target)
    meter = _Meter(f"{field}: fetching {location}", size, progress)
    try:
        client.download_file(
            location.bucket, location.key, str(partial), Callback=meter, Config=TRANSFER
        )
    except (BotoCoreError, ClientError) as exc:
        partial.unlink(missing_ok=True)
        raise Unavailable(f"{field}: could not fetch {location}: {_reason(exc)}") from None
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    partial.replace(target)
    report = TransferReport(size, time.monotonic() - started)
    log.info("%s: fetched %s, %d bytes in %.1fs", field, location, report.bytes, report.seconds)
    return report


def temporary_beside(target: Path) -> Path:
    """A new empty file of this fetch's own beside ``target`` (``.NAME.RANDOM.partial``: its
    directory, so renaming it into place is atomic), made as opening ``target`` would make it
    (mode 0666 less the umask). Two fetches into one destination (two workflows filling one
    persistent volume, two nodes filling a shared one) each write their own file, and the
    destination is always one of them whole."""
    while True:
        partial = target.with_name(f".{target.name[:200]}.{secrets.token_hex(6)}.partial")
        try:
            os.close(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:
            continue
        return partial


def upload(
    source: Path,
    destination: str,
    credentials: S3Credentials,
    *,
    field: str,
    progress: Progress | None = None,
) -> TransferReport:
    """Send the file ``source`` to ``destination`` (``s3://BUCKET/KEY``); Unavailable
    naming ``field`` and the object when it cannot be written."""
    location = S3Location.parse(destination)
    if not source.is_file():
        raise Unavailable(f"{field}: {source.name} is not a file in the volume")
    size = source.stat().st_size
    client = credentials.client()
    started = time.monotonic()
    meter = _Meter(f"{field}: sending {location}", size, progress)
    try:
        client.upload_file(
            str(source), location.bucket, location.key, Callback=meter, Config=TRANSFER
        )
    except (BotoCoreError, ClientError) as exc:
        raise Unavailable(f"{field}: could not send {location}: {_reason(exc)}") from None
    except S3UploadFailedError as exc:
        # boto3 wraps S3's answer, and its text names the local path: only S3's part shown
        cause = exc.__context__ if isinstance(exc.__context__, ClientError) else exc
        reason = _reason(cause) if cause is not exc else "the upload failed"
        raise Unavailable(f"{field}: could not send {location}: {reason}") from None
    report = TransferReport(size, time.monotonic() - started)
    log.info("%s: sent %s, %d bytes in %.1fs", field, location, report.bytes, report.seconds)
    return report


def _reason(exc: BaseException) -> str:
    """A short reason for a boto error: S3's error code and message (no request ids, no
    credentials: S3 never echoes a secret key)."""
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = error.get("Code") or "error"
        message = error.get("Message") or ""
        return f"{code} {message}".strip()
    return type(exc).__name__ if not str(exc) else str(exc)
