"""``fuzzball://`` and ``fb://`` images: the cluster's object cache, held by Orchestrate.

An object-cache URI names an image per account (``fuzzball://user/tools.sif``) or for the
group (``fuzzball://group/base``); only Orchestrate knows whose, so it hands nodes the URI
pinned to the image's *object digest* (``fuzzball://user/tools.sif@sha256:...``): the digest
of a small document naming the EROFS content's digest and the config's digest
(:mod:`fuzzball_core.image_objects`), so images that share a root file system and differ in
config (Env, Cmd, WorkingDir, User) are pinned, and cached on the node, apart. A node
fetches the document, the config and the content over HTTP from ``images.object-cache-url``
with the node token (``images.object-cache-token``) and checks each against its digest
(over https the node trusts ``tls.ca-file``, which Substrate passes here as
``tls-ca-file``); the content already is an EROFS file, so it goes into the node's EROFS
cache as is, under the object digest, with the object's config beside it, where a second
use costs a lookup.

:meth:`ObjectCacheBackend.store` sends the config kept beside the stored file (a pulled
image's, or a build's base's) first, then the content naming that config's digest;
Orchestrate answers the object digest.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx

from fuzzball_core.drivers import ImageBackend, ImageConfig, ResolvedImage, image_config_path
from fuzzball_core.errors import FailedPrecondition, InvalidArgument, NotFound, Unavailable
from fuzzball_core.image_objects import ImageObject, check_digest, verify_digest
from fuzzball_core.tls import client_ssl_context
from fuzzball_plugins.images.blob_store import BlobStore, digest_lock
from fuzzball_plugins.images.settings import ImageSettings

#: the node API path serving object-cache content by digest
BLOB_PATH = "/v3/node-objects/blobs/"
#: the node API path of image configs, by the digest of their document
CONFIG_PATH = "/v3/node-objects/configs/"
#: the node API path of image object documents, by object digest
MANIFEST_PATH = "/v3/node-objects/manifests/"
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
        """The EROFS file of ``image`` (an object-cache image pinned to its object digest)
        kept in the node cache under the digest ``key``, downloaded when the cache holds
        nothing under ``key``.

        A pulled image written back to the object cache is fetched this way under its
        manifest digest (which covers its config as the object digest does), so a node that
        never pulled it finds it where a pull from the registry would have put it (the
        registry backend's lookups and locks are by that digest too). The object document,
        config and content are verified against ``image.digest`` all the same.
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
        partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
        try:
            held = self._object(digest)
            config = self._config_of(held)
            self._download_content(held.content, partial, report)
            if config is not None:
                config.write_beside(target)  # before the image appears: it is read with it
            else:  # an image without a config never reads one a failed fetch left there
                image_config_path(target).unlink(missing_ok=True)
            os.replace(partial, target)
        except httpx.HTTPError as exc:
            raise Unavailable(f"the object cache at {self.url} is unreachable: {exc}") from exc
        finally:
            partial.unlink(missing_ok=True)
        return target

    def _object(self, digest: str) -> ImageObject:
        """The image object ``digest``, its document checked against it."""
        try:
            return ImageObject.parse(self._get(MANIFEST_PATH, digest, "image"), digest)
        except NotFound:
            # a job of a workflow submitted before image objects: its pin names content alone,
            # whose config is not known (two images may share it), so it is not guessed
            head = httpx.head(
                f"{self.url}{BLOB_PATH}{digest}",
                headers=self._authorization(),
                timeout=60.0,
                verify=self.verify,
            )
            if head.status_code == 200:
                raise FailedPrecondition(
                    f"the image {digest} was pinned to its content alone, before object-cache"
                    " images were keyed by content and config: submit the workflow again"
                ) from None
            raise

    def _get(self, path: str, digest: str, what: str) -> bytes:
        """The small document the object cache serves at ``path + digest`` (an object
        document or a config); NotFound when it holds none."""
        response = httpx.get(
            f"{self.url}{path}{digest}",
            headers=self._authorization(),
            timeout=60.0,
            verify=self.verify,
        )
        if response.status_code == 404:
            raise NotFound(f"the object cache holds no {what} {digest}")
        if response.status_code != 200:
            raise Unavailable(f"the object cache answered {response.status_code} for {digest}")
        return response.content

    def _config_of(self, held: ImageObject) -> ImageConfig | None:
        """The config the object ``held`` names, checked against its digest; None for an
        image without one."""
        if not held.config:
            return None
        data = verify_digest(
            self._get(CONFIG_PATH, held.config, "image config"),
            held.config,
            f"the object cache's config {held.config}",
        )
        try:
            return ImageConfig.from_oci(json.loads(data))
        except (ValueError, AttributeError) as exc:
            raise InvalidArgument(f"the object cache's config {held.config}: {exc}") from None

    def _download_content(
        self, digest: str, partial: Path, report: Callable[[str, int, int], None]
    ) -> None:
        """Download the EROFS content ``digest`` into ``partial``, verified."""
        step = f"download {digest}"
        hasher = hashlib.sha256()
        with (
            httpx.stream(
                "GET",
                f"{self.url}{BLOB_PATH}{digest}",
                headers=self._authorization(),
                timeout=60.0,
                verify=self.verify,
            ) as response,
            partial.open("wb") as out,
        ):
            if response.status_code == 404:
                raise NotFound(f"the object cache holds no image content {digest}")
            if response.status_code != 200:
                raise Unavailable(f"the object cache answered {response.status_code} for {digest}")
            total = int(response.headers.get("Content-Length") or 0)
            done = 0
            for chunk in response.iter_bytes(_CHUNK):
                hasher.update(chunk)
                out.write(chunk)
                done += len(chunk)
                report(step, done, total or done)
        if f"sha256:{hasher.hexdigest()}" != digest:
            raise InvalidArgument(f"the object cache's content for {digest} does not match")

    def _store_config(self, image: Path, timeout: float) -> str:
        """Send the config kept beside ``image``; its digest, "" when it has none."""
        config = ImageConfig.read_beside(image)
        if config is None:
            return ""
        response = httpx.put(
            f"{self.url}{CONFIG_PATH.rstrip('/')}",
            json=config.as_oci(),
            headers=self._authorization(),
            timeout=timeout,
            verify=self.verify,
        )
        if response.status_code == 404:
            # an Orchestrate from before image objects: the image is stored all the same
            log.warning(
                "the object cache at %s keeps no image configs: %s runs with an empty config",
                self.url,
                image.name,
            )
            return ""
        if response.status_code != 200:
            raise Unavailable(
                f"the object cache refused the image's config ({response.status_code}):"
                f" {response.text[:300]}"
            )
        return check_digest(str(response.json().get("digest") or ""), "the config's digest")

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
        """Store the EROFS file ``image`` and the config beside it in the object cache at
        ``target`` (owner, scope, name, definition-hash, ttl) through Orchestrate's node API;
        returns its answer (``digest``: the object digest, ``content``, ``size``)."""
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
            # the config first: the content is stored as the object of it and that config
            config = self._store_config(image, timeout)
            if config:
                params["config"] = config
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
        except httpx.HTTPError as exc:
            raise Unavailable(f"the object cache at {self.url} is unreachable: {exc}") from exc
        return answer
