"""The object cache over HTTP: users read their images, nodes read and write content.

* ``GET /v3/objects/{scope}/{name}`` (a user's bearer token): the image at
  ``fuzzball://SCOPE/NAME`` of the caller's account (``user``) or organization (``group``);
  another account's or organization's is 404, as if absent;
* ``GET /v3/node-objects/blobs/{digest}`` (the node token): content by digest, for
  ``fuzzball://`` images Orchestrate pinned for a job;
* ``PUT /v3/node-objects/{scope}/{name}?owner=&definitionHash=&ttl=`` (the node token): a
  node stores a built (or written-back) image; answers ``{"digest", "size"}``;
* ``PUT`` and ``GET /v3/node-objects/configs/{digest}`` (the node token): the image config
  (the OCI ``config`` object, JSON) of content the cache holds, which the storing node sends
  after the content and fetching nodes read with it (404: none was stored).

Orchestrate's server adds them to the REST gateway (``build_rest_app(extra_routes=...)``);
Federate, which holds no cache, does not.
"""

from __future__ import annotations

import asyncio
import hmac
import tempfile
from collections.abc import Callable
from pathlib import Path

from aiohttp import web

from fuzzball_core.api.rest import ExtraRoutes
from fuzzball_core.drivers import ImageConfig
from fuzzball_core.errors import FailedPrecondition, InvalidArgument, NotFound, Unauthenticated
from fuzzball_core.service.contract import ObjectCacheService
from fuzzball_core.service.views import Principal
from fuzzball_core.store.object_cache import CacheAddress, ObjectCache, read_chunks

NODE_OBJECTS_PATH = "/v3/node-objects/"
_CHUNK = 1 << 20
#: the largest image config a node may store
MAX_CONFIG_BYTES = 1 << 20


def object_cache_routes(service: ObjectCacheService) -> ExtraRoutes:
    """The object cache's routes over ``service``'s cache, for the REST gateway."""
    return ExtraRoutes(
        add=lambda app, base, principal_of: add_object_cache_routes(
            app, base, service, principal_of
        ),
        node_paths=(NODE_OBJECTS_PATH,),
        check_node_token=lambda token: check_node_token(service, token),
    )


def check_node_token(service: ObjectCacheService, token: str) -> None:
    """Accept only Orchestrate's node token (compared in constant time)."""
    expected = service.node_token
    if not expected or not hmac.compare_digest(expected.encode(), token.encode()):
        raise Unauthenticated("the node token is not valid")


def add_object_cache_routes(
    app: web.Application,
    base: str,
    service: ObjectCacheService,
    principal_of: Callable[[web.Request], Principal],
) -> None:
    """Add the object cache's routes under ``base`` (``/v3``)."""

    def cache(request: web.Request) -> ObjectCache:
        held = service.object_cache
        if held is None:
            raise FailedPrecondition("this Orchestrate holds no object cache")
        return held

    async def user_object(request: web.Request) -> web.StreamResponse:
        held = cache(request)
        account_id = principal_of(request).account_id
        # another account's user images, another organization's group images: absent
        address = CacheAddress.checked(
            account_id,
            request.match_info["scope"],
            request.match_info["name"],
            group=held.group_of(account_id),
        )
        entry = held.lookup(address)
        if entry is None:
            raise NotFound(
                f"fuzzball://{address.scope}/{address.name}: no such image in the object cache"
            )
        return web.FileResponse(held.open_blob(entry.digest))

    async def node_blob(request: web.Request) -> web.StreamResponse:
        return web.FileResponse(cache(request).open_blob(request.match_info["digest"]))

    async def node_store(request: web.Request) -> web.Response:
        held = cache(request)
        owner = request.query.get("owner", "")  # what Orchestrate told the node: either scope's
        address = CacheAddress.checked(
            owner, request.match_info["scope"], request.match_info["name"], group=owner
        )
        ttl_text = request.query.get("ttl", "")
        try:
            ttl = float(ttl_text) if ttl_text else None
        except ValueError as exc:
            raise InvalidArgument(f"ttl: {ttl_text!r} is not a number of seconds") from exc
        with tempfile.TemporaryDirectory(dir=held.directory / "incoming") as staging:
            received = Path(staging) / "content"
            with received.open("wb") as out:
                async for chunk in request.content.iter_chunked(_CHUNK):
                    out.write(chunk)
            entry = await asyncio.get_running_loop().run_in_executor(
                None,
                lambda: held.store(
                    address,
                    read_chunks(received),
                    definition_hash=request.query.get("definitionHash", ""),
                    ttl=ttl,
                ),
            )
        return web.json_response({"digest": entry.digest, "size": entry.size})

    async def node_config(request: web.Request) -> web.Response:
        digest = request.match_info["digest"]
        config = cache(request).read_config(digest)
        if config is None:
            raise NotFound(f"the object cache holds no config for {digest}")
        return web.json_response(config)

    async def node_store_config(request: web.Request) -> web.Response:
        if (request.content_length or 0) > MAX_CONFIG_BYTES:
            raise InvalidArgument(f"an image config is at most {MAX_CONFIG_BYTES} bytes")
        try:
            document = await request.json()
        except ValueError as exc:
            raise InvalidArgument("the image config is not JSON") from exc
        if not isinstance(document, dict):
            raise InvalidArgument("the image config is not a JSON object")
        # read as the nodes will read it: a malformed field is refused here, not on a node
        config = ImageConfig.from_oci(document)
        cache(request).store_config(request.match_info["digest"], config.as_oci())
        return web.json_response({})

    app.router.add_get(f"{base}/objects/{{scope}}/{{name:.+}}", user_object)
    app.router.add_get(f"{base}/node-objects/blobs/{{digest}}", node_blob)
    # before the store route, whose {scope}/{name} would match configs/DIGEST too
    app.router.add_get(f"{base}/node-objects/configs/{{digest}}", node_config)
    app.router.add_put(f"{base}/node-objects/configs/{{digest}}", node_store_config)
    app.router.add_put(f"{base}/node-objects/{{scope}}/{{name:.+}}", node_store)
