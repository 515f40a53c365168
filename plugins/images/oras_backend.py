"""``oras://`` images: Apptainer SIF files stored in OCI registries as ORAS artifacts.

The artifact's one SIF layer is pulled like any blob (verified, resumable, coalesced); its
primary squashfs partition is unpacked with ``unsquashfs`` and the tree becomes EROFS. The
image's config is the SIF's own (:func:`fuzzball_plugins.images.sif.image_config`): read with
range requests when the image is pinned, from the pulled file on a node, where the unpacked
tree adds its Apptainer environment scripts (:func:`fuzzball_plugins.images.sif.with_env_scripts`).
"""

from __future__ import annotations

import dataclasses
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fuzzball_core.drivers import ImageConfig, ResolvedImage
from fuzzball_core.errors import FailedPrecondition, InvalidArgument
from fuzzball_plugins.images.pinned_manifests import KeptByDigest, pinned_manifest
from fuzzball_plugins.images.platforms import platform_matches
from fuzzball_plugins.images.reference import ImageReference
from fuzzball_plugins.images.registry_backend import RegistryImageBackend
from fuzzball_plugins.images.registry_client import MANIFEST_TYPES, Manifest, RegistryClient
from fuzzball_plugins.images.sif import (
    HEADER,
    file_reader,
    image_config,
    parse_header,
    primary_partition,
    with_env_scripts,
)

SIF_LAYER = "application/vnd.sylabs.sif.layer.v1.sif"
SIF_CONFIG = "application/vnd.sylabs.sif.config.v1+json"
#: what a pin read of a SIF artifact, by its manifest's digest: a tag pinned again costs a
#: HEAD, not the manifest and the range requests of its header and config
_SIF_PINS: KeptByDigest[ResolvedImage] = KeptByDigest()


def _sif_layer(manifest: Mapping[str, Any], reference: object) -> Mapping[str, Any]:
    layers = [item for item in manifest.get("layers") or [] if item.get("mediaType") == SIF_LAYER]
    if len(layers) != 1:
        raise InvalidArgument(
            f"{reference} is not a SIF artifact: expected one layer of type {SIF_LAYER}, "
            f"found {len(layers)}"
        )
    return layers[0]


class OrasBackend(RegistryImageBackend):
    """Pulls SIF images pushed with ``oras push`` / ``apptainer push oras://``."""

    schemes = ("oras",)

    def _pin(self, client: RegistryClient, reference: ImageReference) -> ResolvedImage:
        manifest = pinned_manifest(client)
        if manifest.media_type not in MANIFEST_TYPES:
            raise InvalidArgument(f"{reference} is an index, not a SIF artifact")
        read = _SIF_PINS.get(client, manifest.digest)
        if read is None:
            read = self._read_sif(client, reference, manifest)
            _SIF_PINS.keep(client, manifest.digest, read)
        self._check_platform(read.platform, reference)
        return dataclasses.replace(read, uri=reference.uri())

    def _read_sif(
        self, client: RegistryClient, reference: ImageReference, manifest: Manifest
    ) -> ResolvedImage:
        """What the SIF of ``manifest`` says of itself: its platform and config, read with
        range requests (the platform first, so a foreign image is refused without more)."""
        sif_layer = _sif_layer(manifest.json(), reference)
        # The SIF header names the architecture: read just its first 128 bytes, so a
        # foreign image fails at submission rather than after a long download.
        digest = str(sif_layer["digest"])
        what = f"SIF image in {reference}"
        header = parse_header(client.get_blob_range(digest, 0, HEADER.size), what=what)
        platform = f"linux/{header.architecture}"
        self._check_platform(platform, reference)
        return ResolvedImage(
            uri=reference.uri(),
            digest=manifest.digest,
            size=int(sif_layer["size"]),
            platform=platform,
            annotations={"media-type": SIF_LAYER},
            config=image_config(
                lambda offset, length: client.get_blob_range(digest, offset, length),
                int(sif_layer["size"]),
                what=what,
            ),
        )

    def _check_platform(self, platform: str, reference: ImageReference) -> None:
        if not platform_matches(platform, self.settings.platform):
            raise InvalidArgument(
                f"no {self.settings.platform} image in {reference}; available: {platform}"
            )

    def _blobs_to_fetch(self, manifest: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
        return [_sif_layer(manifest, "the artifact")]

    def _image_config(
        self, client: RegistryClient, manifest: Mapping[str, Any], blobs: Sequence[Path]
    ) -> ImageConfig:
        (sif_path,) = blobs
        return image_config(
            file_reader(sif_path), sif_path.stat().st_size, what=f"SIF image {sif_path.name}"
        )

    def _convert(self, blobs: Sequence[Path], scratch: Path, out_path: Path) -> None:
        from fuzzball_runtime.erofs import build_from_dir

        (sif_path,) = blobs
        partition = primary_partition(sif_path)
        scratch.mkdir(parents=True, exist_ok=True)
        rootfs = scratch / "rootfs"
        command = [
            "unsquashfs",
            "-no-progress",
            "-quiet",
            "-offset",
            str(partition.offset),
            "-dest",
            str(rootfs),
            str(sif_path),
        ]
        try:
            result = subprocess.run(command, capture_output=True, text=True, check=False)
        except FileNotFoundError:
            raise FailedPrecondition(
                "unsquashfs is not installed on this node (Debian package squashfs-tools)"
            ) from None
        if result.returncode != 0:
            raise InvalidArgument(
                f"the squashfs partition of SIF image {sif_path.name} could not be unpacked: "
                f"{result.stderr.strip()[-500:]}"
            )
        self._note_env_scripts(rootfs, out_path)
        build_from_dir(str(rootfs), str(out_path))

    @staticmethod
    def _note_env_scripts(rootfs: Path, out_path: Path) -> None:
        """Add the unpacked tree's Apptainer environment scripts to the config kept beside
        ``out_path`` (written before the conversion; rewritten before the EROFS file
        appears): only the tree shows them, and the SIF's metadata read at the pin does not."""
        config = ImageConfig.read_beside(out_path)
        if config is None:
            return
        noted = with_env_scripts(config, rootfs)
        if noted != config:
            noted.write_beside(out_path)
