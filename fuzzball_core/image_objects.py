"""Image objects: what an object-cache image is, named by one digest over content and config.

An object-cache image is an EROFS file (its *content*) and the OCI ``config`` object it runs
with (Env, Entrypoint, Cmd, WorkingDir, User). Two images may share their root file system
and differ in config, so the content digest alone does not name an image: a pin or a cache
keyed by it hands one image's config to the other's jobs. Like an OCI manifest, an image
object is a small canonical JSON document naming the content's digest and size and the
config's digest and size (``null`` for an image that carries no config); the *object digest*
is the SHA-256 of that document's bytes. Pins (``fuzzball://user/tools@sha256:...``), the
object cache's entries and the nodes' cached copies are keyed by it, while the content is
still stored once per content digest however many objects share it.

Orchestrate writes the documents (:meth:`ImageObject.document`); a node reads one back with
:meth:`ImageObject.parse`, which refuses bytes that do not hash to the digest asked for, and
checks the config's bytes the same way (:func:`verify_digest`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from fuzzball_core.drivers import ImageConfig
from fuzzball_core.errors import InvalidArgument

#: the ``mediaType`` of an image object document
MEDIA_TYPE = "application/vnd.fuzzball.image.object.v1+json"
#: the ``mediaType`` of the config an object names
CONFIG_MEDIA_TYPE = "application/vnd.oci.image.config.v1+json"
#: the ``mediaType`` of the EROFS content an object names
CONTENT_MEDIA_TYPE = "application/vnd.fuzzball.image.erofs"
#: the largest object document a node reads (a real one is a few hundred bytes)
MAX_DOCUMENT_BYTES = 1 << 16


def sha256_digest(data: bytes) -> str:
    """``sha256:<hex>`` of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def check_digest(digest: str, what: str = "digest") -> str:
    """``digest`` when it is ``sha256:`` and 64 lower-case hex digits; InvalidArgument naming
    ``what`` otherwise."""
    algorithm, _, hexdigest = digest.partition(":")
    if algorithm != "sha256" or len(hexdigest) != 64 or hexdigest.strip("0123456789abcdef"):
        raise InvalidArgument(f"{what} {digest!r} is not a sha256 digest")
    return digest


def verify_digest(data: bytes, digest: str, what: str) -> bytes:
    """``data`` when it hashes to ``digest``; InvalidArgument saying ``what`` did not match."""
    actual = sha256_digest(data)
    if actual != digest:
        raise InvalidArgument(
            f"{what} does not match its digest {digest} (its bytes hash to {actual})"
        )
    return data


def config_document(config: ImageConfig) -> bytes:
    """The canonical bytes of ``config`` (the OCI ``config`` object, keys sorted, no spaces):
    equal configs have one document, so one digest."""
    return _canonical(config.as_oci())


@dataclass(frozen=True)
class ImageObject:
    """One image: its EROFS content and its config, by digest and size."""

    content: str
    size: int
    #: the digest of the config's :func:`config_document`; "" for an image without a config
    config: str = ""
    config_size: int = 0

    @classmethod
    def of(cls, content: str, size: int, config: ImageConfig | None) -> ImageObject:
        """The object of ``content`` (``size`` bytes) run with ``config`` (None: none)."""
        if config is None:
            return cls(check_digest(content, "content digest"), size)
        document = config_document(config)
        return cls(
            check_digest(content, "content digest"), size, sha256_digest(document), len(document)
        )

    def document(self) -> bytes:
        """The canonical JSON document naming content and config (what :attr:`digest`
        hashes)."""
        config = (
            {"mediaType": CONFIG_MEDIA_TYPE, "digest": self.config, "size": self.config_size}
            if self.config
            else None
        )
        return _canonical(
            {
                "mediaType": MEDIA_TYPE,
                "content": {
                    "mediaType": CONTENT_MEDIA_TYPE,
                    "digest": self.content,
                    "size": self.size,
                },
                "config": config,
            }
        )

    @property
    def digest(self) -> str:
        """The object digest: the SHA-256 of :meth:`document`."""
        return sha256_digest(self.document())

    @classmethod
    def parse(cls, data: bytes, digest: str) -> ImageObject:
        """The object whose document ``data`` was served for ``digest``.

        InvalidArgument when ``data`` does not hash to ``digest`` (a corrupted or substituted
        document) or is not an image object document.
        """
        what = f"the image object document for {digest}"
        if len(data) > MAX_DOCUMENT_BYTES:
            raise InvalidArgument(f"{what} is larger than {MAX_DOCUMENT_BYTES} bytes")
        verify_digest(data, check_digest(digest, "object digest"), what)
        try:
            document = json.loads(data)
            if document["mediaType"] != MEDIA_TYPE:
                raise InvalidArgument(f"{what} has the media type {document['mediaType']!r}")
            content = document["content"]
            config = document["config"] or {}
            return cls(
                check_digest(str(content["digest"]), "content digest"),
                _size(content["size"]),
                check_digest(str(config["digest"]), "config digest") if config else "",
                _size(config["size"]) if config else 0,
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidArgument(f"{what} is not an image object document: {exc!r}") from None


def _size(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"size {value!r} is not a byte count")
    return value


def _canonical(document: Any) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()
