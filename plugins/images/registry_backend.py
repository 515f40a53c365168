"""What the registry-based backends share: settings, clients, the node caches and progress.

A subclass decides which manifest a URI resolves to, how downloaded blobs become an EROFS
file and where the image's config is; this base class pins the digest, looks the EROFS cache
up first (a second use of an image costs a lookup, not a pull), serialises concurrent pulls
of one image with a lock per manifest digest, downloads and verifies blobs, keeps the config
beside the EROFS file (written before the file appears, so a cached file without one was
converted before configs were kept), and reports progress.

Blobs download in parallel (:data:`PARALLEL_DOWNLOADS` at a time, over one client's
connection pool), and conversion overlaps them: each blob goes to the subclass's
:class:`Conversion` as soon as it and every blob before it are verified, in manifest order,
while later blobs are still downloading (a docker image applies its lower layers meanwhile).
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
from abc import abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from fuzzball_core.drivers import ImageBackend, ImageConfig, ResolvedImage, image_config_path
from fuzzball_core.errors import InvalidArgument
from fuzzball_plugins.images.blob_store import BlobStore, digest_file_name, digest_lock
from fuzzball_plugins.images.reference import ImageReference, parse_reference
from fuzzball_plugins.images.registry_client import Manifest, RegistryClient, http_client
from fuzzball_plugins.images.settings import ImageSettings

if TYPE_CHECKING:
    from fuzzball_runtime.erofs import ImageCache

Progress = Callable[[str, int, int], None]
#: blobs of one image downloaded at once: enough to keep a fast link busy while one blob's
#: server is slow, few enough not to crowd a registry
PARALLEL_DOWNLOADS = 4


def _no_progress(step: str, done: int, total: int) -> None:
    """Progress sink used when the caller passes none."""


class Conversion:
    """One image's conversion: blobs handed over in manifest order as they are verified, then
    the EROFS file built. This default keeps the blobs and calls the backend's
    ``_convert`` at the end; a backend that can start on a blob early returns its own."""

    def __init__(
        self, convert: Callable[[Sequence[Path], Path, Path], None], scratch: Path
    ) -> None:
        self._convert = convert
        self.scratch = scratch
        self.blobs: list[Path] = []

    def add(self, blob: Path) -> None:
        """Take the next verified blob (called while later blobs may still download)."""
        self.blobs.append(blob)

    def finish(self, out_path: Path) -> None:
        """Build the EROFS file ``out_path`` (atomically) from every blob added."""
        self._convert(self.blobs, self.scratch, out_path)


@dataclass(frozen=True)
class Downloaded:
    """An image's verified blobs in the node's blob store, and its config."""

    blobs: list[Path]
    config: ImageConfig


class RegistryImageBackend(ImageBackend):
    """An :class:`ImageBackend` whose images live in OCI registries."""

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        super().__init__(config)
        self.settings = ImageSettings.from_config(config)
        self.retry = self.settings.retry
        self._anonymous_http: httpx.Client | None = None
        self._anonymous_http_lock = threading.Lock()

    # -- subclass hooks --------------------------------------------------------------------

    @abstractmethod
    def _pin(self, client: RegistryClient, reference: ImageReference) -> ResolvedImage:
        """Resolve ``reference`` to the digest of the manifest a node will pull."""

    @abstractmethod
    def _blobs_to_fetch(self, manifest: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
        """The descriptors (``digest``, ``size``) of the blobs the conversion needs."""

    @abstractmethod
    def _image_config(
        self, client: RegistryClient, manifest: Mapping[str, Any], blobs: Sequence[Path]
    ) -> ImageConfig:
        """The image's config, read from the registry (``client``) or the ``blobs``."""

    @abstractmethod
    def _convert(self, blobs: Sequence[Path], scratch: Path, out_path: Path) -> None:
        """Build the EROFS file ``out_path`` (atomically) from the verified ``blobs``.

        ``scratch`` is a directory path on the cache's file system for intermediate files;
        it is removed afterwards.
        """

    def _conversion(self, scratch: Path) -> Conversion:
        """A conversion into ``scratch`` (a directory path on the cache's file system, which
        the caller removes afterwards); by default one that runs ``_convert`` at the end."""
        return Conversion(self._convert, scratch)

    # -- ImageBackend ----------------------------------------------------------------------

    def parse(self, uri: str) -> ImageReference:
        """Parse ``uri`` and check that it is one of this backend's schemes."""
        reference = parse_reference(uri, default_scheme=self.schemes[0])
        if reference.scheme not in self.schemes:
            raise InvalidArgument(
                f"image.uri: scheme {reference.scheme!r} is not served by this backend "
                f"({', '.join(self.schemes)})"
            )
        return reference

    def check_reference(self, uri: str) -> None:
        """:meth:`parse`, offline: a malformed reference (``docker://Alpine``) is refused."""
        self.parse(uri)

    def client(
        self, reference: ImageReference, credentials: Mapping[str, str] | None
    ) -> RegistryClient:
        """A registry client for ``reference`` that honours the configured mirrors.

        Anonymous clients share one connection pool: a burst of submissions pins an image
        hundreds of times, and a pool of their own cost each pin a new HTTP client, a name
        lookup, a TCP connection and its close (about 0.4 ms of Orchestrate's CPU a
        workflow under 2,000 separate ones). A client with credentials keeps a pool of its
        own, so that nothing one submitter's registry set (a cookie) goes with another's
        requests.
        """
        if credentials is not None:
            return RegistryClient(reference, self.settings, credentials)
        return RegistryClient(reference, self.settings, http=self._shared_http())

    def _shared_http(self) -> httpx.Client:
        """The connection pool of this backend's anonymous clients, made on first use."""
        with self._anonymous_http_lock:
            if self._anonymous_http is None:
                self._anonymous_http = http_client(self.settings)
            return self._anonymous_http

    def resolve(self, uri: str, *, credentials: Mapping[str, str] | None = None) -> ResolvedImage:
        """Pin ``uri`` to a manifest digest; fails early for missing, private or foreign images."""
        reference = self.parse(uri)
        with self.client(reference, credentials) as client:
            return self._pin(client, reference)

    def image_cache(self, cache_dir: Path) -> ImageCache:
        """The node's EROFS cache under ``cache_dir`` (bounded by ``cache-max-bytes``)."""
        from fuzzball_runtime.erofs import ImageCache

        return ImageCache(cache_dir / "images", self.settings.cache_max_bytes or sys.maxsize)

    def fetch(
        self,
        image: ResolvedImage,
        cache_dir: Path,
        *,
        credentials: Mapping[str, str] | None = None,
        progress: Progress | None = None,
    ) -> Path:
        """Return the EROFS file for ``image``, pulling and converting it only when absent.

        Progress steps: ``resolve``, ``download <digest>`` (bytes), ``convert``, ``done``; a
        cache hit reports only ``done``.
        """
        report = progress or _no_progress
        cache = self.image_cache(cache_dir)
        cached = cache.get(image.digest)
        if cached is not None:
            report("done", 1, 1)
            return cached
        with digest_lock(BlobStore(cache_dir).lock_dir, image.digest):
            cached = cache.get(image.digest)  # another thread or process built it meanwhile
            if cached is None:
                cached = cache.path_for(image.digest)
                scratch = cache_dir / "scratch" / f"{digest_file_name(image.digest)}.{os.getpid()}"
                # a pull killed midway under a reused process id left its tree here
                shutil.rmtree(scratch, ignore_errors=True)
                scratch.mkdir(parents=True)
                try:
                    self._pull_and_convert(image, cache_dir, scratch, cached, credentials, report)
                except BaseException:
                    image_config_path(cached).unlink(missing_ok=True)
                    raise
                finally:
                    shutil.rmtree(scratch, ignore_errors=True)
        cache.evict(keep=cached)
        report("done", 1, 1)
        return cached

    def _pull_and_convert(
        self,
        image: ResolvedImage,
        cache_dir: Path,
        scratch: Path,
        out_path: Path,
        credentials: Mapping[str, str] | None,
        report: Progress,
    ) -> None:
        """Download ``image``'s blobs in parallel, converting them as they arrive, and build
        ``out_path`` with the image's config beside it."""
        conversion = self._conversion(scratch)
        with self._downloads(image, cache_dir, credentials, report) as (client, document, blobs):
            for future in blobs:
                conversion.add(future.result())
            config = self._image_config(client, document, conversion.blobs)
        report("convert", 0, 1)
        config.write_beside(out_path)
        conversion.finish(out_path)
        report("convert", 1, 1)

    def download(
        self,
        image: ResolvedImage,
        cache_dir: Path,
        *,
        credentials: Mapping[str, str] | None = None,
        progress: Progress | None = None,
    ) -> Downloaded:
        """Download and verify the blobs ``image`` is made of into ``cache_dir``'s blob store,
        and read its config.

        Blobs already present are not fetched again; a blob another thread or process is
        downloading is waited for rather than downloaded twice.
        """
        report = progress or _no_progress
        with self._downloads(image, cache_dir, credentials, report) as (client, document, blobs):
            paths = _results(blobs)
            return Downloaded(paths, self._image_config(client, document, paths))

    @contextmanager
    def _downloads(
        self,
        image: ResolvedImage,
        cache_dir: Path,
        credentials: Mapping[str, str] | None,
        report: Progress,
    ) -> Iterator[tuple[RegistryClient, dict[str, Any], list[Future[Path]]]]:
        """Fetch ``image``'s manifest and start downloading its blobs in parallel; yields the
        client, the manifest and one future per blob, in manifest order.

        Leaving the block waits for the downloads still running (a blob left half-way is
        resumed by the next pull) after cancelling those not started.
        """
        store = BlobStore(cache_dir)
        reference = self.parse(image.uri).with_digest(image.digest)
        with self.client(reference, credentials) as client:
            report("resolve", 0, 1)
            manifest = client.get_manifest(image.digest)
            report("resolve", 1, 1)
            document = self._checked(manifest)
            descriptors = self._blobs_to_fetch(document)
            pool = ThreadPoolExecutor(
                max_workers=max(1, min(PARALLEL_DOWNLOADS, len(descriptors))),
                thread_name_prefix="blob-download",
            )
            try:
                yield (
                    client,
                    document,
                    [
                        pool.submit(self._ensure_blob, client, store, descriptor, report)
                        for descriptor in descriptors
                    ],
                )
            finally:
                pool.shutdown(wait=True, cancel_futures=True)

    # -- helpers ---------------------------------------------------------------------------

    @staticmethod
    def _checked(manifest: Manifest) -> dict[str, Any]:
        document = manifest.json()
        if not isinstance(document.get("layers"), list):
            raise InvalidArgument(f"manifest {manifest.digest} lists no layers")
        return document

    @staticmethod
    def _ensure_blob(
        client: RegistryClient,
        store: BlobStore,
        descriptor: Mapping[str, Any],
        report: Progress,
    ) -> Path:
        digest = str(descriptor["digest"])
        size = int(descriptor["size"])
        step = f"download {digest}"
        #: the bytes last reported: a blob whose download reported its whole size is not
        #: reported done a second time (each report is an event the workflow shows)
        reported = [-1]

        def on_bytes(done: int, total: int) -> None:
            reported[0] = done
            report(step, done, total)

        with store.lock(digest):
            if not store.has(digest, size):
                client.download_blob(digest, size, store.path(digest), on_bytes=on_bytes)
        if reported[0] != size:
            report(step, size, size)
        return store.path(digest)


def _results(blobs: Sequence[Future[Path]]) -> list[Path]:
    """The downloaded blobs' paths in order (raising the first failure, in that order)."""
    return [future.result() for future in blobs]
