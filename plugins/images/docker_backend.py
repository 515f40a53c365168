"""``docker://`` images: OCI and Docker v2 manifests and indexes, converted layer by layer.

The image config blob is read when the image is pinned (its platform, and its ``config``
object, which Orchestrate checks the job against) and again when a node pulls the image (the
``config`` object is kept beside the EROFS file).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar

from fuzzball_core.drivers import ImageConfig, ResolvedImage
from fuzzball_core.errors import InvalidArgument
from fuzzball_plugins.images.platforms import platform_matches, platform_of
from fuzzball_plugins.images.reference import ImageReference
from fuzzball_plugins.images.registry_backend import Conversion, RegistryImageBackend
from fuzzball_plugins.images.registry_client import INDEX_TYPES, Manifest, RegistryClient

T = TypeVar("T")

#: Layer media types the runtime's layer applier understands (tar, optionally gzip-compressed).
LAYER_TYPES = frozenset(
    {
        "application/vnd.oci.image.layer.v1.tar",
        "application/vnd.oci.image.layer.v1.tar+gzip",
        "application/vnd.docker.image.rootfs.diff.tar",
        "application/vnd.docker.image.rootfs.diff.tar.gzip",
    }
)


class DockerBackend(RegistryImageBackend):
    """Pulls container images over the OCI Distribution API and flattens them into EROFS."""

    schemes = ("docker",)

    def _pin(self, client: RegistryClient, reference: ImageReference) -> ResolvedImage:
        wanted = self.settings.platform
        manifest = _pinned_manifest(client)
        annotations: dict[str, str] = {}
        if manifest.media_type in INDEX_TYPES:
            annotations["index-digest"] = manifest.digest
            manifest = self._select_platform(client, reference, manifest, wanted)
        document = manifest.json()
        config_descriptor = document.get("config") or {}
        if not config_descriptor.get("digest"):
            raise InvalidArgument(f"image {reference} has a manifest without a config")
        config = _config_document(client, config_descriptor, kept=True)
        platform = platform_of(config)
        if not platform_matches(platform, wanted):
            raise InvalidArgument(f"no {wanted} image in {reference}; available: {platform}")
        layers = document.get("layers") or []
        unsupported = sorted({str(layer.get("mediaType")) for layer in layers} - LAYER_TYPES)
        if unsupported:
            raise InvalidArgument(
                f"image {reference} has layers of unsupported media type {', '.join(unsupported)}"
            )
        size = int(config_descriptor.get("size", 0)) + sum(int(layer["size"]) for layer in layers)
        return ResolvedImage(
            uri=reference.uri(),
            digest=manifest.digest,
            size=size,
            platform=platform,
            annotations=annotations,
            config=ImageConfig.from_oci(config),
        )

    @staticmethod
    def _select_platform(
        client: RegistryClient, reference: ImageReference, index: Manifest, wanted: str
    ) -> Manifest:
        entries = index.json().get("manifests") or []
        available: list[str] = []
        for entry in entries:
            platform = platform_of(entry.get("platform") or {})
            if platform.startswith("unknown/"):
                continue  # attestation manifests (buildx provenance) are not runnable
            available.append(platform)
            if platform_matches(platform, wanted):
                return _listed_manifest(client, str(entry["digest"]))
        listed = ", ".join(sorted(set(available))) or "none"
        raise InvalidArgument(f"no {wanted} image in {reference}; available: {listed}")

    def _blobs_to_fetch(self, manifest: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
        return list(manifest["layers"])

    def _image_config(
        self, client: RegistryClient, manifest: Mapping[str, Any], blobs: Sequence[Path]
    ) -> ImageConfig:
        return ImageConfig.from_oci(_config_document(client, manifest.get("config") or {}))

    def _convert(self, blobs: Sequence[Path], scratch: Path, out_path: Path) -> None:
        conversion = self._conversion(scratch)
        for blob in blobs:
            conversion.add(blob)
        conversion.finish(out_path)

    def _conversion(self, scratch: Path) -> Conversion:
        return _LayerConversion(scratch)


class _LayerConversion(Conversion):
    """Layers applied as they arrive (the lower ones while the upper ones download); the
    compression chosen from their content (none for data lz4 cannot shrink)."""

    def __init__(self, scratch: Path) -> None:
        from fuzzball_runtime.erofs import AUTO_COMPRESSION, LayerBuild

        super().__init__(lambda blobs, scratch, out: None, scratch)
        self.build = LayerBuild(scratch, compression=AUTO_COMPRESSION)

    def add(self, blob: Path) -> None:
        """Apply the next layer onto the tree."""
        super().add(blob)
        self.build.apply(blob)

    def finish(self, out_path: Path) -> None:
        """Convert the tree."""
        self.build.build(out_path)


class _KeptByDigest(Generic[T]):
    """What registries served under a content digest (config blobs, manifests), verified,
    by registry, repository and digest. Named by its content, a kept one never goes stale.
    Only a request just answered by the same repository for this caller leads to one (the
    manifest that names a config; the HEAD that names a manifest's digest), so whoever
    reaches it was allowed to read it. Most recently used first out of :attr:`LIMIT`.
    """

    #: items kept (a config or manifest is a few KiB)
    LIMIT = 256

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: OrderedDict[tuple[str, str, str], T] = OrderedDict()

    def get(self, client: RegistryClient, digest: str) -> T | None:
        """The item kept under ``digest`` in ``client``'s repository, or None."""
        key = (client.reference.registry, client.repository, digest)
        with self._lock:
            item = self._items.get(key)
            if item is not None:
                self._items.move_to_end(key)
            return item

    def keep(self, client: RegistryClient, digest: str, item: T) -> None:
        """Keep ``item`` (verified against ``digest``) for ``client``'s repository."""
        with self._lock:
            self._items[(client.reference.registry, client.repository, digest)] = item
            while len(self._items) > self.LIMIT:
                self._items.popitem(last=False)


#: config blobs read when pinning: a tag pinned at each submission costs no config fetch
_CONFIG_BLOBS: _KeptByDigest[bytes] = _KeptByDigest()
#: manifests and indexes read when pinning, by their digest
_MANIFESTS: _KeptByDigest[Manifest] = _KeptByDigest()


def _pinned_manifest(client: RegistryClient, reference: str | None = None) -> Manifest:
    """The manifest or index a tag or digest (default: ``client``'s own) names now.

    The registry is asked at every pin, with a HEAD (a moved tag is seen at once); the body
    is fetched only for a digest not read before, or when the registry names no digest, or
    refuses a HEAD. A burst of submissions of one image then costs its registry a HEAD each
    round trip instead of a GET, which Docker Hub counts as a pull against its rate limit
    (10 an hour for an address without credentials) even when every node has the image.
    """
    try:
        announced = client.head_manifest(reference)
    except InvalidArgument:  # refused as a method (HTTP 405 and the like): the GET decides
        announced = None
    if announced is not None:
        kept = _MANIFESTS.get(client, announced)
        if kept is not None:
            return kept
    manifest = client.get_manifest(reference)
    _MANIFESTS.keep(client, manifest.digest, manifest)
    return manifest


def _listed_manifest(client: RegistryClient, digest: str) -> Manifest:
    """The manifest ``digest`` an index just pinned lists: kept, else fetched and kept (no
    HEAD: the index named it, and a registry keeps what an index it serves lists)."""
    kept = _MANIFESTS.get(client, digest)
    if kept is None:
        kept = client.get_manifest(digest)
        _MANIFESTS.keep(client, digest, kept)
    return kept


def _config_document(
    client: RegistryClient, descriptor: Mapping[str, Any], *, kept: bool = False
) -> dict[str, Any]:
    """The image config blob ``descriptor`` names, verified and parsed; with ``kept``, one
    fetched before is read from :data:`_CONFIG_BLOBS` (pinning at submission; a node's pull
    fetches it once per image anyway)."""
    if not descriptor.get("digest"):
        raise InvalidArgument(f"{client.reference} has a manifest without a config")
    digest = str(descriptor["digest"])
    data = _CONFIG_BLOBS.get(client, digest) if kept else None
    if data is None:
        data = client.get_blob_bytes(digest)  # verified against the digest
        if kept:
            _CONFIG_BLOBS.keep(client, digest, data)
    try:
        document = json.loads(data)
    except ValueError:
        raise InvalidArgument(f"the config of {client.reference} is not JSON") from None
    if not isinstance(document, dict):
        raise InvalidArgument(f"the config of {client.reference} is not a JSON object")
    return document
