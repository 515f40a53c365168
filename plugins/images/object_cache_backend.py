"""``fuzzball://`` and ``fb://`` images: the cluster's object cache, held by Orchestrate.

An object-cache URI names an image per account (``fuzzball://user/tools.sif``) or for the
group (``fuzzball://group/base``); only Orchestrate knows whose, so it hands nodes the URI
pinned to the content digest (``fuzzball://user/tools.sif@sha256:...``). A node fetches the
content by digest over HTTP from ``images.object-cache-url`` with the node token
(``images.object-cache-token``) and verifies it (over https the node trusts ``tls.ca-file``,
which Substrate passes here as ``tls-ca-file``); the content already is an EROFS file, so
it goes into the node's EROFS cache as is, where a second use costs a lookup.

The image's config travels beside the content: :meth:`ObjectCacheBackend.store` sends the
config kept beside the stored file (a pulled image's, or a build's base's) after the
content, and a fetch keeps the config the cache holds beside the cached file.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx

from fuzzball_core.drivers import ImageBackend, ImageConfig, ResolvedImage
from fuzzball_core.errors import FailedPrecondition, InvalidArgument, NotFound, Unavailable
from fuzzball_core.tls import client_ssl_context
from fuzzball_plugins.images.blob_store import BlobStore, digest_lock
from fuzzball_plugins.images.settings import ImageSettings

#: the node API path serving object-cache content by digest
BLOB_PATH = "/v3/node-objects/blobs/"
#: the node API path of the configs of object-cache content, by digest
CONFIG_PATH = "/v3/node-objects/configs/"
_CHUNK = 1 << 20

log = logging.getLogger("fuzzball.images")


class ObjectCacheBackend(ImageBackend):
    """Fetches pinned object-cache images from Orchestrate."""

    schemes = ("fuzzball", "fb")

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        super().__init__(config)
        self.settings = ImageSettings.from_config(config)
        self.retry = self.settings.retry
        self.url = str(self.config.get("object-cache-url") or "").rstrip("/")
        self.token = str(self.config.get("object-cache-token") or "")
        # an https object cache is Orchestrate's REST: its certificate is from the cluster's CA
        self.verify = client_ssl_context(self.config.get("tls-ca-file") or None)

    def resolve(self, uri: str, *, credentials: Mapping[str, str] | None = None) -> ResolvedImage:
        """The digest pinned in ``uri``; a bare object-cache URI cannot be resolved on a node."""
        scheme, separator, rest = uri.partition("://")
        if not separator or scheme.lower() not in self.schemes or "/" not in rest:
            raise InvalidArgument(f"image.uri: {uri!r} is not a fuzzball://SCOPE/NAME URI")
        address, _, digest = rest.partition("@")
        if not digest:
            raise InvalidArgument(
                f"image.uri: {uri} is not pinned to a digest; object-cache images are"
                " resolved by Orchestrate for the workflow's owner"
            )
        return ResolvedImage(f"{scheme}://{address}", digest, 0, "")

    def fetch(
        self,
        image: ResolvedImage,
        cache_dir: Path,
        *,
        credentials: Mapping[str, str] | None = None,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> Path:
        """The EROFS file of ``image`` in the node cache, downloaded when absent."""
        return self.fetch_as(image, cache_dir, image.digest, progress=progress)

    def fetch_as(
        self,
        image: ResolvedImage,
        cache_dir: Path,
        key: str,
        *,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> Path:
        """The EROFS file of ``image`` (an object-cache image pinned to its content digest)
        kept in the node cache under the digest ``key``, downloaded when the cache holds
        nothing under ``key``.

        A pulled image written back to the object cache is fetched this way under its
        manifest digest, so a node that never pulled it finds it where a pull from the
        registry would have put it (the registry backend's lookups and locks are by that
        digest too). The content is verified against ``image.digest`` all the same.
        """
        from fuzzball_runtime.erofs import ImageCache

        report = progress or (lambda step, done, total: None)
        cache = ImageCache(cache_dir / "images", self.settings.cache_max_bytes or sys.maxsize)
        cached = cache.get(key)
        if cached is None:
            with digest_lock(BlobStore(cache_dir).lock_dir, key):
                cached = cache.get(key)
                if cached is None:
                    cached = self._download(image.digest, cache.path_for(key), report)
        cache.evict(keep=cached)
        report("done", 1, 1)
        return cached

    def _download(self, digest: str, target: Path, report: Callable[[str, int, int], None]) -> Path:
        if not self.url:
            raise FailedPrecondition(
                "images.object-cache-url: must be set for fuzzball:// and fb:// images"
            )
        step = f"download {digest}"
        partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
        hasher = hashlib.sha256()
        headers = self._authorization()
        try:
            config = self._config_of(digest)
            with (
                httpx.stream(
                    "GET",
                    f"{self.url}{BLOB_PATH}{digest}",
                    headers=headers,
                    timeout=60.0,
                    verify=self.verify,
                ) as response,
                partial.open("wb") as out,
            ):
                if response.status_code == 404:
                    raise NotFound(f"the object cache holds no image {digest}")
                if response.status_code != 200:
                    raise Unavailable(
                        f"the object cache answered {response.status_code} for {digest}"
                    )
                total = int(response.headers.get("Content-Length") or 0)
                done = 0
                for chunk in response.iter_bytes(_CHUNK):
                    hasher.update(chunk)
                    out.write(chunk)
                    done += len(chunk)
                    report(step, done, total or done)
            if f"sha256:{hasher.hexdigest()}" != digest:
                raise InvalidArgument(f"the object cache's content for {digest} does not match")
            if config is not None:
                config.write_beside(target)  # before the image appears: it is read with it
            os.replace(partial, target)
        except httpx.HTTPError as exc:
            raise Unavailable(f"the object cache at {self.url} is unreachable: {exc}") from exc
        finally:
            partial.unlink(missing_ok=True)
        return target

    def _config_of(self, digest: str) -> ImageConfig | None:
        """The config the object cache keeps for ``digest``; None when it keeps none."""
        response = httpx.get(
            f"{self.url}{CONFIG_PATH}{digest}",
            headers=self._authorization(),
            timeout=60.0,
            verify=self.verify,
        )
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise Unavailable(
                f"the object cache answered {response.status_code} for the config of {digest}"
            )
        return ImageConfig.from_oci(response.json())

    def _store_config(self, image: Path, digest: str, timeout: float) -> None:
        """Send the config kept beside ``image`` for the stored content ``digest``."""
        config = ImageConfig.read_beside(image)
        if config is None:
            return
        response = httpx.put(
            f"{self.url}{CONFIG_PATH}{digest}",
            json=config.as_oci(),
            headers=self._authorization(),
            timeout=timeout,
            verify=self.verify,
        )
        if response.status_code == 404:
            # an Orchestrate from before configs were kept: the image is stored all the same
            log.warning(
                "the object cache at %s keeps no image configs: %s runs with an empty config",
                self.url,
                digest,
            )
        elif response.status_code != 200:
            raise Unavailable(
                f"the object cache refused the config of {digest} ({response.status_code}):"
                f" {response.text[:300]}"
            )

    def _authorization(self) -> dict[str, str]:
        # no header without a token: httpx refuses "Bearer " (a value ending in a space)
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def store_unavailable(self) -> str | None:
        """Without ``images.object-cache-url`` the node has no object cache to store into."""
        return None if self.url else "images.object-cache-url is not set on this node"

    def store(
        self,
        target: Mapping[str, Any],
        image: Path,
        *,
        progress: Callable[[str, int, int], None] | None = None,
        timeout: float = 60.0,
    ) -> dict[str, Any]:
        """Store the EROFS file ``image`` in the object cache at ``target`` (owner, scope,
        name, definition-hash, ttl) through Orchestrate's node API; returns its answer."""
        problem = self.store_unavailable()
        if problem is not None:
            raise FailedPrecondition(problem)
        report = progress or (lambda step, done, total: None)
        total = image.stat().st_size

        def chunks() -> Any:
            done = 0
            with image.open("rb") as f:
                while chunk := f.read(_CHUNK):
                    done += len(chunk)
                    report("upload", done, total)
                    yield chunk

        params = {
            "owner": str(target.get("owner") or ""),
            "definitionHash": str(target.get("definition-hash") or ""),
        }
        if target.get("ttl"):
            params["ttl"] = str(target["ttl"])
        address = f"{self.url}/v3/node-objects/{target['scope']}/{target['name']}"
        try:
            response = httpx.put(
                address,
                params=params,
                content=chunks(),
                timeout=timeout,
                headers={**self._authorization(), "Content-Length": str(total)},
                verify=self.verify,
            )
            if response.status_code != 200:
                raise Unavailable(
                    f"the object cache refused the upload ({response.status_code}):"
                    f" {response.text[:300]}"
                )
            answer = dict(response.json())
            self._store_config(image, str(answer.get("digest") or ""), timeout)
        except httpx.HTTPError as exc:
            raise Unavailable(f"the object cache at {self.url} is unreachable: {exc}") from exc
        return answer
