"""A job's image on this node: the backend chosen by URI scheme, the EROFS file in the cache.

``docker://alpine:latest`` is served by the ``fuzzball.image_backends`` driver named
``docker``, ``oras://...`` by ``oras``, and so on for a site's own schemes; a URI without a
scheme is a docker reference. Each backend pins the reference to a digest (one registry
round trip), then returns the cached EROFS file or pulls and converts it.

A job's image comes pinned: Orchestrate pinned it at submission and sends the job's URI with
that digest attached (``docker://alpine:3@sha256:...``), so every run of the workflow, on
any node and however late, runs the image the submission saw, fetched by digest (from the
cache, without asking the registry, when the pull stage or an earlier job made it ready
here). A URI without a digest (images not pinned by Orchestrate) is pinned here, and that
pin is remembered for ``resolve_ttl`` seconds (or the job's ``image.cache-ttl``), so a burst
of jobs with one image costs one registry request; concurrent jobs wait for a single pull
instead of each starting their own.

A pull whose image another node already wrote back to the cluster's object cache comes with
that copy's pinned ``fuzzball://`` URI (``cached``): the converted EROFS file is fetched from
Orchestrate, verified, and kept under the image's own digest, so this node neither
downloads the layers from the registry nor converts them. When the copy cannot be had the
pull goes to the registry as usual.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fuzzball_core.drivers import (
    IMAGE_BACKENDS,
    ImageBackend,
    ImageConfig,
    ResolvedImage,
    image_config_path,
)
from fuzzball_core.errors import FuzzballError, InvalidArgument
from fuzzball_core.plugins import PluginRegistry

GROUP = IMAGE_BACKENDS
#: the scheme of the backend that stores images on the cluster (the object cache): pulled
#: images are written back and built images stored through it
STORE_SCHEME = "fuzzball"
#: Seconds a tag stays pinned to the digest it resolved to.
DEFAULT_RESOLVE_TTL = 60.0

log = logging.getLogger("fuzzball.images")


def uri_scheme(uri: str) -> str:
    """The scheme of an image URI (``docker`` when it has none)."""
    scheme, separator, rest = uri.partition("://")
    if not separator:
        return "docker"
    if not scheme or not rest:
        raise InvalidArgument(f"image.uri: {uri!r} is not a valid image URI")
    return scheme.lower()


@dataclass
class _Pinned:
    path: Path
    expires_at: float


class NodeImages:
    """Fetches images into ``cache_dir`` through the backend of each URI's scheme."""

    def __init__(
        self,
        registry: PluginRegistry,
        images_config: Mapping[str, Any],
        cache_dir: Path,
        *,
        resolve_ttl: float = DEFAULT_RESOLVE_TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.registry = registry
        self.images_config = dict(images_config)
        self.cache_dir = cache_dir
        self.resolve_ttl = resolve_ttl
        self._clock = clock
        self._backends: dict[str, ImageBackend] = {}
        self._pinned: dict[str, _Pinned] = {}
        #: the EROFS file each (uri, digest) was made ready as here
        self._by_digest: dict[tuple[str, str], Path] = {}
        self._uri_locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        #: configs read beside cached images: path -> (the config file's identity, config)
        self._configs: dict[str, tuple[tuple[int, int, int], ImageConfig]] = {}

    def backend(self, scheme: str) -> ImageBackend:
        """The backend serving ``scheme``, loaded once."""
        with self._lock:
            backend = self._backends.get(scheme)
            if backend is None:
                if not self.registry.find(GROUP, scheme):
                    installed = {r.name for r in self.registry.records if r.group == GROUP}
                    known = ", ".join(sorted(installed)) or "none"
                    raise InvalidArgument(
                        f"image.uri: no image backend serves the scheme {scheme!r}"
                        f" (installed: {known})"
                    )
                backend = self.registry.driver(GROUP, scheme, self.images_config)
                self._backends[scheme] = backend
            return backend

    def store(self) -> ImageBackend:
        """The backend images are stored through (:data:`STORE_SCHEME`'s), loaded once."""
        return self.backend(STORE_SCHEME)

    def _uri_lock(self, uri: str) -> threading.Lock:
        with self._lock:
            return self._uri_locks.setdefault(uri, threading.Lock())

    def ensure(
        self,
        uri: str,
        *,
        credentials: Mapping[str, str] | None = None,
        ttl: float | None = None,
        digest: str = "",
        cached: str = "",
        progress: Callable[[str, int, int], None] | None = None,
    ) -> Path:
        """The EROFS file of ``uri``, pulled and converted when the cache lacks it (blocking).

        With ``digest`` (pinned by Orchestrate at submission), or a URI with its digest
        attached (``...@sha256:...``: a job's), the image is fetched by it without asking
        the registry again; with ``cached`` too (the pinned ``fuzzball://`` URI of the
        object cache's copy of that image) it is fetched from the object cache first.
        ``progress(step, done, total)`` follows the backend's steps. Raises the backend's
        typed errors (NotFound, FailedPrecondition, PermissionDenied, ...).
        """
        uri, attached = split_digest(uri)
        digest = digest or attached
        pinned = self._fresh(uri) if not digest else None
        if pinned is not None:
            if progress is not None:
                progress("done", 1, 1)
            return pinned
        with self._uri_lock(uri):
            pinned = self._fresh(uri) if not digest else None  # a concurrent job pulled it
            if pinned is not None:
                return pinned
            backend = self.backend(uri_scheme(uri))
            copy = self._from_object_cache(cached, digest, progress) if cached and digest else None
            if copy is not None:
                path = copy
            else:
                if digest:
                    resolved = ResolvedImage(uri, digest, 0, "")
                else:
                    resolved = backend.resolve(uri, credentials=credentials)
                path = backend.fetch(
                    resolved, self.cache_dir, credentials=credentials, progress=progress
                )
            with self._lock:
                if digest:
                    self._by_digest[(uri, digest)] = Path(path)
                else:
                    # only the registry's answer tells what the tag names now: a fetch by a
                    # digest pinned earlier (a submission's) does not
                    lifetime = self.resolve_ttl if ttl is None else ttl
                    self._pinned[uri] = _Pinned(Path(path), self._clock() + lifetime)
            return Path(path)

    def _from_object_cache(
        self, cached: str, digest: str, progress: Callable[[str, int, int], None] | None
    ) -> Path | None:
        """The object cache's copy ``cached`` of the image of ``digest``, kept in the node
        cache under ``digest``; None (logged) when it cannot be had."""
        try:
            store = self.store()
            fetch_as = getattr(store, "fetch_as", None)
            if fetch_as is None:
                return None  # a site's own storing backend, which cannot file it under digest
            return Path(fetch_as(store.resolve(cached), self.cache_dir, digest, progress=progress))
        except Exception as exc:  # the registry still has the image
            reason = exc.message if isinstance(exc, FuzzballError) else repr(exc)
            log.warning("image %s: the object cache's copy %s failed: %s", digest, cached, reason)
            return None

    def pinned(self, uri: str) -> Path | None:
        """The EROFS file of ``uri`` when it is ready here at the digest attached to it, or
        its tag is pinned here and still fresh (what :meth:`ensure` would return without
        asking anyone), else None. Never blocks."""
        uri, digest = split_digest(uri)
        if digest:
            return self.ready(uri, digest)
        return self._fresh(uri)

    def ready(self, uri: str, digest: str) -> Path | None:
        """The EROFS file of ``uri`` at ``digest`` when :meth:`ensure` made it ready here
        before and it is still in the cache (what ``ensure`` would return without pulling),
        else None. Never blocks: a digest names the image for good, so only the file's
        presence is checked."""
        if not digest:
            return None
        with self._lock:
            path = self._by_digest.get((split_digest(uri)[0], digest))
        if path is None or not path.exists():
            return None
        return path

    def config(self, image: Path) -> ImageConfig | None:
        """The config kept beside the cached EROFS file ``image``
        (:meth:`ImageConfig.read_beside`), None when it has none.

        Read once per config file: every run of an array asked for it, and opening, reading
        and parsing it was the largest single part of a job's set-up on the agent's loop. A
        file replaced since (another inode, size or mtime: the image converted again) is
        read again; a missing one is looked for again every time."""
        path = image_config_path(image)
        try:
            found = os.stat(path)
        except FileNotFoundError:
            return None
        identity = (found.st_ino, found.st_size, found.st_mtime_ns)
        known = self._configs.get(str(path))
        if known is not None and known[0] == identity:
            return known[1]
        config = ImageConfig.read_beside(image)
        if config is not None:
            self._configs[str(path)] = (identity, config)
        return config

    def _fresh(self, uri: str) -> Path | None:
        with self._lock:
            pinned = self._pinned.get(uri)
        if pinned is None or pinned.expires_at <= self._clock() or not pinned.path.exists():
            return None
        return pinned.path


def split_digest(uri: str) -> tuple[str, str]:
    """``uri`` without the digest attached to it, and that digest ("" when none):
    ``docker://alpine:3@sha256:ab...`` -> (``docker://alpine:3``, ``sha256:ab...``)."""
    name, separator, digest = uri.rpartition("@")
    if not separator or ":" not in digest or "/" in digest:
        return uri, ""
    return name, digest


def describe_pull_failure(uri: str, exc: BaseException) -> str:
    """The run's failure message when its image could not be made ready."""
    reason = exc.message if isinstance(exc, FuzzballError) else f"{type(exc).__name__}: {exc}"
    return f"image {uri} could not be pulled: {reason}"
