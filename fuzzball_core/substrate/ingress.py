"""Volume ingress on a node: the files a job's mounted volumes start with, fetched once.

Volumes live on each node (``substrate.volumes``), so every node that runs a job mounting a
volume with an ``ingress`` fetches it into its own copy before the first such job starts;
later jobs of the workflow on that node find a marker next to the volume and start at once,
and jobs starting together wait for one fetch. Sources are HTTP(S) URLs (Orchestrate
refuses others at submission). Each download streams into a temporary file beside its
destination and is renamed into place, so a job never sees half a file.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx

from fuzzball_core.errors import Unavailable
from fuzzball_core.substrate.volumes import WorkflowVolumes
from fuzzball_runtime.layers import resolve_in_root

#: seconds without progress before a download is given up
READ_TIMEOUT = 60.0
CHUNK = 1 << 20

_locks: dict[Path, threading.Lock] = {}
_locks_guard = threading.Lock()


def fetch_ingress(
    volumes: WorkflowVolumes,
    workflow_id: str,
    ingress: Mapping[str, Sequence[Mapping[str, str]]],
    authorization: Mapping[str, str] | None = None,
) -> None:
    """Fill each volume in ``ingress`` (volume -> [{source, destination, secret?}]) unless
    this node already did; a source with a secret is fetched with its ``Authorization``
    header from ``authorization`` (by ``VOLUME/INDEX``, resolved by Orchestrate as the run
    started). Raises :class:`Unavailable` naming the transfer that failed."""
    for volume, transfers in ingress.items():
        directory = volumes.volume_dir(workflow_id, volume)
        marker = directory.parent / f".{directory.name}.ingress-done"
        with _lock_for(marker):
            if marker.exists():
                continue
            for index, transfer in enumerate(transfers):
                header = (authorization or {}).get(f"{volume}/{index}")
                _fetch(directory, transfer, f"volumes.{volume}.ingress[{index}]", header)
            marker.touch()


def _lock_for(marker: Path) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(marker, threading.Lock())


def _fetch(
    directory: Path, transfer: Mapping[str, str], field: str, authorization: str | None = None
) -> None:
    source = transfer["source"]
    target = resolve_in_root(directory, "/" + transfer["destination"].lstrip("/"))
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial")
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
                    f"{field}: could not fetch {_shown(source)}: HTTP {response.status_code}"
                )
            with partial.open("wb") as out:
                for chunk in response.iter_bytes(CHUNK):
                    out.write(chunk)
    except httpx.HTTPError as exc:
        partial.unlink(missing_ok=True)
        reason = type(exc).__name__ if not str(exc) else str(exc)
        raise Unavailable(f"{field}: could not fetch {_shown(source)}: {reason}") from None
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    partial.replace(target)


def _shown(url: str) -> str:
    """``url`` as errors may show it: no credentials, no query (signed URLs carry tokens)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))
