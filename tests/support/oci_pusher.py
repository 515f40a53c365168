"""Build OCI images from files at test time and push them with the Distribution upload API.

Layers are tar archives written with :mod:`tarfile` (optionally gzip-compressed); configs and
manifests are JSON whose digests are computed here; blobs go up with the monolithic
(``POST`` + ``PUT ?digest=``) or the chunked (``PATCH`` with ``Content-Range``) upload flow.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import httpx

BUSYBOX = Path("/bin/busybox")
BUSYBOX_APPLETS = ("sh", "ls", "cat", "echo", "id", "true")
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER_TAR = "application/vnd.oci.image.layer.v1.tar"
LAYER_TAR_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_MANIFEST_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
DOCKER_LAYER_GZIP = "application/vnd.docker.image.rootfs.diff.tar.gzip"


def sha256_digest(data: bytes) -> str:
    """``sha256:<hex>`` of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Entry:
    """One member of a layer tarball: a file, directory, symlink, whiteout or opaque marker."""

    path: str
    kind: str = "file"  # file | dir | symlink
    data: bytes = b""
    mode: int = 0o644
    uid: int = 0
    gid: int = 0
    target: str = ""


def file(path: str, data: bytes, *, mode: int = 0o644, uid: int = 0, gid: int = 0) -> Entry:
    """A regular file."""
    return Entry(path, "file", data, mode, uid, gid)


def directory(path: str, *, mode: int = 0o755, uid: int = 0, gid: int = 0) -> Entry:
    """A directory."""
    return Entry(path, "dir", mode=mode, uid=uid, gid=gid)


def symlink(path: str, target: str) -> Entry:
    """A symbolic link."""
    return Entry(path, "symlink", mode=0o777, target=target)


def whiteout(path: str) -> Entry:
    """The marker that deletes ``path`` from the layers below (``dir/.wh.name``)."""
    parent, _, name = path.rpartition("/")
    return file(f"{parent}/.wh.{name}" if parent else f".wh.{name}", b"")


def opaque(directory_path: str) -> Entry:
    """The marker that hides everything below ``directory_path`` in lower layers."""
    return file(f"{directory_path}/.wh..wh..opq", b"")


def busybox_entries() -> list[Entry]:
    """Debian's static busybox as ``/bin/busybox`` with a few applet links."""
    entries = [directory("bin"), file("bin/busybox", BUSYBOX.read_bytes(), mode=0o755)]
    entries += [symlink(f"bin/{applet}", "busybox") for applet in BUSYBOX_APPLETS]
    entries += [directory("etc"), directory("tmp", mode=0o1777)]
    return entries


def tar_bytes(entries: Iterable[Entry]) -> bytes:
    """An uncompressed tar archive of ``entries`` (fixed mtimes: reproducible digests)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for entry in entries:
            info = tarfile.TarInfo(entry.path)
            info.mode, info.uid, info.gid, info.mtime = entry.mode, entry.uid, entry.gid, 1700000000
            if entry.kind == "dir":
                info.type = tarfile.DIRTYPE
                archive.addfile(info)
            elif entry.kind == "symlink":
                info.type, info.linkname = tarfile.SYMTYPE, entry.target
                archive.addfile(info)
            else:
                info.size = len(entry.data)
                archive.addfile(info, io.BytesIO(entry.data))
    return buffer.getvalue()


@dataclass(frozen=True)
class Layer:
    """A layer blob with its media type and the digest of its uncompressed tar (diff_id)."""

    blob: bytes
    media_type: str
    diff_id: str

    @property
    def digest(self) -> str:
        """The blob's digest as the manifest names it."""
        return sha256_digest(self.blob)

    def descriptor(self) -> dict[str, Any]:
        """The manifest's descriptor for this layer."""
        return {"mediaType": self.media_type, "digest": self.digest, "size": len(self.blob)}


def layer(entries: Iterable[Entry], *, compress: bool = True) -> Layer:
    """Build a layer from ``entries``, gzip-compressed unless ``compress`` is false."""
    raw = tar_bytes(entries)
    if compress:
        return Layer(
            gzip.compress(raw, compresslevel=1, mtime=0), LAYER_TAR_GZIP, sha256_digest(raw)
        )
    return Layer(raw, LAYER_TAR, sha256_digest(raw))


@dataclass(frozen=True)
class PushedImage:
    """What a push produced: the manifest's digest and the blobs it references."""

    repository: str
    tag: str
    digest: str
    manifest_size: int
    config_digest: str
    layers: Sequence[Layer] = field(default_factory=tuple)
    architecture: str = "amd64"


class Pusher:
    """Pushes blobs and manifests to one registry (``base_url``), optionally with basic auth."""

    def __init__(
        self,
        base_url: str,
        auth: tuple[str, str] | None = None,
        *,
        bearer_token: str | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        headers = {"Authorization": f"Bearer {bearer_token}"} if bearer_token else {}
        self.http = httpx.Client(auth=auth, headers=headers, timeout=120.0)
        self.media_types: dict[str, str] = {}

    def close(self) -> None:
        """Close the connection pool."""
        self.http.close()

    def _start_upload(self, repository: str) -> str:
        reply = self.http.post(f"{self.base_url}/v2/{repository}/blobs/uploads/")
        reply.raise_for_status()
        return urljoin(self.base_url + "/", reply.headers["location"])

    def push_blob(self, repository: str, data: bytes, *, chunk_size: int | None = None) -> str:
        """Upload ``data`` (monolithic, or chunked when ``chunk_size`` is given); return digest."""
        digest = sha256_digest(data)
        location = self._start_upload(repository)
        if chunk_size:
            for start in range(0, len(data), chunk_size):
                part = data[start : start + chunk_size]
                reply = self.http.patch(
                    location,
                    content=part,
                    headers={
                        "Content-Type": "application/octet-stream",
                        "Content-Range": f"{start}-{start + len(part) - 1}",
                    },
                )
                reply.raise_for_status()
                location = urljoin(self.base_url + "/", reply.headers["location"])
            body = b""
        else:
            body = data
        separator = "&" if "?" in location else "?"
        reply = self.http.put(
            f"{location}{separator}digest={digest}",
            content=body,
            headers={"Content-Type": "application/octet-stream"},
        )
        reply.raise_for_status()
        return digest

    def push_manifest(
        self, repository: str, reference: str, document: dict[str, Any]
    ) -> tuple[str, int]:
        """PUT a manifest or index under ``reference``; return its digest and size."""
        data = json.dumps(document, separators=(",", ":")).encode()
        reply = self.http.put(
            f"{self.base_url}/v2/{repository}/manifests/{reference}",
            content=data,
            headers={"Content-Type": document["mediaType"]},
        )
        reply.raise_for_status()
        return sha256_digest(data), len(data)

    def push_image(
        self,
        repository: str,
        tag: str,
        layers: Sequence[Layer],
        *,
        architecture: str = "amd64",
        chunk_size: int | None = None,
        config_extra: dict[str, Any] | None = None,
        docker_format: bool = False,
    ) -> PushedImage:
        """Push ``layers``, a config for ``linux/architecture`` and the manifest tagged ``tag``.

        ``docker_format`` writes Docker's schema 2 media types instead of OCI's.
        """
        config = {
            "architecture": architecture,
            "os": "linux",
            "config": {"Cmd": ["/bin/sh"], "Env": ["PATH=/bin"], **(config_extra or {})},
            "rootfs": {"type": "layers", "diff_ids": [item.diff_id for item in layers]},
        }
        config_data = json.dumps(config, separators=(",", ":")).encode()
        config_digest = self.push_blob(repository, config_data)
        for item in layers:
            self.push_blob(repository, item.blob, chunk_size=chunk_size)
        layer_descriptors = [item.descriptor() for item in layers]
        if docker_format:
            for descriptor in layer_descriptors:
                descriptor["mediaType"] = DOCKER_LAYER_GZIP
        manifest = {
            "schemaVersion": 2,
            "mediaType": DOCKER_MANIFEST if docker_format else OCI_MANIFEST,
            "config": {
                "mediaType": DOCKER_CONFIG if docker_format else OCI_CONFIG,
                "digest": config_digest,
                "size": len(config_data),
            },
            "layers": layer_descriptors,
        }
        digest, size = self.push_manifest(repository, tag, manifest)
        self.media_types[digest] = manifest["mediaType"]
        return PushedImage(
            repository, tag, digest, size, config_digest, tuple(layers), architecture
        )

    def push_index(
        self,
        repository: str,
        tag: str,
        images: Sequence[PushedImage],
        *,
        docker_format: bool = False,
    ) -> str:
        """Push an index (or a Docker manifest list) over pushed images; return its digest."""
        index = {
            "schemaVersion": 2,
            "mediaType": DOCKER_MANIFEST_LIST if docker_format else OCI_INDEX,
            "manifests": [
                {
                    "mediaType": self.media_types.get(image.digest, OCI_MANIFEST),
                    "digest": image.digest,
                    "size": image.manifest_size,
                    "platform": {"os": "linux", "architecture": image.architecture},
                }
                for image in images
            ],
        }
        digest, _ = self.push_manifest(repository, tag, index)
        return digest

    def push_artifact(
        self,
        repository: str,
        tag: str,
        blob: bytes,
        *,
        media_type: str,
        config_media_type: str,
        title: str,
    ) -> str:
        """Push a one-layer OCI artifact the way ``oras push`` does; return the manifest digest."""
        config = b"{}"
        config_digest = self.push_blob(repository, config)
        blob_digest = self.push_blob(repository, blob)
        manifest = {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": config_media_type, "digest": config_digest, "size": 2},
            "layers": [
                {
                    "mediaType": media_type,
                    "digest": blob_digest,
                    "size": len(blob),
                    "annotations": {"org.opencontainers.image.title": title},
                }
            ],
        }
        digest, _ = self.push_manifest(repository, tag, manifest)
        return digest


def pushed_image_uri(host: str, repository: str, layers: Sequence[Layer], tag: str = "1") -> str:
    """Push ``layers`` as ``repository:tag`` to the registry at ``http://host``; the image's
    ``docker://`` URI."""
    pusher = Pusher(f"http://{host}")
    try:
        pusher.push_image(repository, tag, layers)
    finally:
        pusher.close()
    return f"docker://{host}/{repository}:{tag}"
