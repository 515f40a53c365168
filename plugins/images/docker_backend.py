"""``docker://`` images: OCI and Docker v2 manifests and indexes, converted layer by layer.

The image config blob is read when the image is pinned (its platform, and its ``config``
object, which Orchestrate checks the job against) and again when a node pulls the image (the
``config`` object is kept beside the EROFS file).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fuzzball_core.drivers import ImageConfig, ResolvedImage
from fuzzball_core.errors import InvalidArgument
from fuzzball_plugins.images.pinned_manifests import KeptByDigest, listed_manifest, pinned_manifest
from fuzzball_plugins.images.platforms import platform_matches, platform_of
from fuzzball_plugins.images.reference import ImageReference
from fuzzball_plugins.images.registry_backend import Conversion, RegistryImageBackend
from fuzzball_plugins.images.registry_client import INDEX_TYPES, Manifest, RegistryClient

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
        manifest = pinned_manifest(client)
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
                return listed_manifest(client, str(entry["digest"]))
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


#: config blobs read when pinning: a tag pinned at each submission costs no config fetch
_CONFIG_BLOBS: KeptByDigest[bytes] = KeptByDigest()


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
