"""What a pin reads from a registry, kept by the digest that names it.

A submission pins each image: its tag is asked of the registry every time (a tag moved just
before is seen at once), but what a digest names never changes, so a manifest, an index or a
blob read for one pin serves the next without a fetch. The tag is asked with a HEAD of its
manifest, which names the digest: Docker Hub counts a GET of a manifest as a pull against
its rate limit (10 an hour for an address without credentials) and a HEAD not, so pinning
every submission of an image the nodes already have spends none of it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

from fuzzball_core.errors import InvalidArgument
from fuzzball_plugins.images.registry_client import Manifest, RegistryClient

T = TypeVar("T")


class KeptByDigest(Generic[T]):
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


#: manifests and indexes read when pinning, by their digest
_MANIFESTS: KeptByDigest[Manifest] = KeptByDigest()


def pinned_manifest(client: RegistryClient, reference: str | None = None) -> Manifest:
    """The manifest or index a tag or digest (default: ``client``'s own) names now.

    The registry is asked at every pin, with a HEAD (see the module's docstring); the body
    is fetched only for a digest not read before, or when the registry names no digest, or
    refuses a HEAD.
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


def listed_manifest(client: RegistryClient, digest: str) -> Manifest:
    """The manifest ``digest`` an index just pinned lists: kept, else fetched and kept (no
    HEAD: the index named it, and a registry keeps what an index it serves lists)."""
    kept = _MANIFESTS.get(client, digest)
    if kept is None:
        kept = client.get_manifest(digest)
        _MANIFESTS.keep(client, digest, kept)
    return kept
