"""Image references: parse ``[scheme://][registry/]repository[:tag][@digest]`` and normalise it.

Normalisation follows Docker's rules so that ``alpine`` and ``docker.io/library/alpine:latest``
name the same image: a first path component that holds no ``.`` or ``:`` and is not
``localhost`` is part of the repository, not a registry, so the registry is Docker Hub; Docker
Hub repositories without a namespace live under ``library/``; a missing tag means ``latest``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fuzzball_core.errors import InvalidArgument

DOCKER_HUB = "docker.io"
#: Docker Hub's API is served from this host, not from docker.io itself.
DOCKER_HUB_API_HOST = "registry-1.docker.io"
_DOCKER_HUB_ALIASES = frozenset({"docker.io", "index.docker.io", "registry-1.docker.io"})

# The grammar of github.com/distribution/reference, without the domain part.
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REPOSITORY_RE = re.compile(rf"^{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*$")
_TAG_RE = re.compile(r"^[\w][\w.-]{0,127}$")
_DIGEST_RE = re.compile(r"^sha256:[a-f0-9]{64}$|^sha512:[a-f0-9]{128}$")
_REGISTRY_RE = re.compile(r"^(?:\[[0-9a-fA-F:]+\]|[a-zA-Z0-9.-]+)(?::[0-9]+)?$")
_LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]"})


@dataclass(frozen=True)
class ImageReference:
    """A normalised image reference.

    ``tag`` is ``None`` only when the reference names a digest alone.
    """

    scheme: str
    registry: str
    repository: str
    tag: str | None
    digest: str | None

    @property
    def name(self) -> str:
        """``registry/repository``, e.g. ``docker.io/library/alpine``."""
        return f"{self.registry}/{self.repository}"

    @property
    def reference(self) -> str:
        """What the manifest endpoint is asked for: the digest when pinned, else the tag."""
        return self.digest or self.tag or "latest"

    @property
    def is_loopback(self) -> bool:
        """True for ``localhost:PORT``-style registries, which are spoken to over plain HTTP."""
        if self.registry.startswith("["):
            host = self.registry[: self.registry.index("]") + 1]
        else:
            host = self.registry.split(":", 1)[0]
        return host in _LOOPBACK_HOSTS

    @property
    def api_base(self) -> str:
        """The registry's own API base URL (mirrors come from configuration, not from here)."""
        host = DOCKER_HUB_API_HOST if self.registry == DOCKER_HUB else self.registry
        return f"{'http' if self.is_loopback else 'https'}://{host}"

    def with_digest(self, digest: str) -> ImageReference:
        """The same image pinned to ``digest`` (the tag is kept for display)."""
        return ImageReference(self.scheme, self.registry, self.repository, self.tag, digest)

    def __str__(self) -> str:
        text = f"{self.name}:{self.tag}" if self.tag else self.name
        return f"{text}@{self.digest}" if self.digest else text

    def uri(self) -> str:
        """The canonical URI, scheme included: ``docker://docker.io/library/alpine:latest``."""
        return f"{self.scheme}://{self}"


def parse_reference(
    text: str, *, default_scheme: str = "docker", field: str = "image.uri"
) -> ImageReference:
    """Parse and normalise an image reference; ``field`` names it in error messages.

    Raises ``InvalidArgument`` for anything the OCI reference grammar does not allow.
    """
    original = text
    scheme = default_scheme
    if "://" in text:
        scheme, text = text.split("://", 1)
    if not text:
        raise InvalidArgument(f"{field}: empty image reference {original!r}")

    digest: str | None = None
    if "@" in text:
        text, digest = text.split("@", 1)
        if not _DIGEST_RE.match(digest):
            raise InvalidArgument(f"{field}: {digest!r} in {original!r} is not a valid digest")

    tag: str | None = None
    last_slash = text.rfind("/")
    colon = text.rfind(":")
    if colon > last_slash:
        text, tag = text[:colon], text[colon + 1 :]
        if not _TAG_RE.match(tag):
            raise InvalidArgument(f"{field}: {tag!r} in {original!r} is not a valid tag")

    first, _, rest = text.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        registry, repository = first, rest
        if not _REGISTRY_RE.match(registry):
            raise InvalidArgument(f"{field}: {registry!r} in {original!r} is not a registry host")
        if registry.lower() in _DOCKER_HUB_ALIASES:
            registry = DOCKER_HUB
    else:
        registry, repository = DOCKER_HUB, text
    if registry == DOCKER_HUB and "/" not in repository:
        repository = f"library/{repository}"
    if not _REPOSITORY_RE.match(repository):
        raise InvalidArgument(
            f"{field}: {repository!r} in {original!r} is not a valid repository name "
            "(lower-case letters, digits and separators)"
        )
    if tag is None and digest is None:
        tag = "latest"
    return ImageReference(scheme, registry, repository, tag, digest)
