"""The object cache over HTTP: users read their images, nodes read and write content.

* ``GET /v3/objects/{scope}/{name}`` (a user's bearer token): the image at
  ``fuzzball://SCOPE/NAME`` of the caller's account (``user``) or organization (``group``);
  another account's or organization's is 404, as if absent;
* ``GET /v3/node-objects/manifests/{digest}`` (the node token): the image object document of
  an object digest, which Orchestrate pins ``fuzzball://`` images to for jobs
  (:mod:`fuzzball_core.image_objects`): it names the content's digest and the config's;
* ``GET /v3/node-objects/blobs/{digest}`` and ``GET /v3/node-objects/configs/{digest}`` (the
  node token): content and config documents by their own digests;
* ``PUT /v3/node-objects/configs`` (the node token): a node stores an image's config (the OCI
  ``config`` object, JSON) before its content; answers ``{"digest"}``, the digest of the
  config's canonical document;
* ``PUT /v3/node-objects/{scope}/{name}?owner=&definitionHash=&ttl=&config=`` (the node
  token): a node stores a built (or written-back) image's content, run with the config of
  digest ``config`` (none when absent); answers ``{"digest", "content", "size"}``: the object
  digest, the content digest and its size.

A node older than image objects sends the config after the content, to
``configs/{content digest}``: that is 404, as from an Orchestrate that kept no configs, so the
node warns that the image runs with an empty config instead of that config being shared by
every image of the same content.

Orchestrate's server adds them to the REST gateway (``build_rest_app(extra_routes=...)``);
Federate, which holds no cache, does not.
"""

from __future__ import annotations

import asyncio
import hmac
import math
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from fuzzball_core.api.gateway_thread import any_thread
from fuzzball_core.api.json_body import parse_json_body
from fuzzball_core.api.openapi import (
    BINARY,
    Body,
    JsonOperation,
    MediaOperation,
    Query,
    documented,
)
from fuzzball_core.api.rest import ExtraRoutes
from fuzzball_core.errors import FailedPrecondition, InvalidArgument, NotFound, Unauthenticated
from fuzzball_core.image_objects import MEDIA_TYPE
from fuzzball_core.service.contract import ObjectCacheService
from fuzzball_core.service.views import Principal
from fuzzball_core.store.object_cache import CacheAddress, ObjectCache, read_chunks

NODE_OBJECTS_PATH = "/v3/node-objects/"
_CHUNK = 1 << 20
#: the largest image config a node may store
MAX_CONFIG_BYTES = 1 << 20

# -- the routes' declarations, for the OpenAPI document ------------------------------------------
_TAGS = ("object cache",)
_STRING: dict[str, Any] = {"type": "string"}
_CONTENT = Body("application/octet-stream", "the image's content (its bytes)", BINARY)
_SIZED = {
    "type": "object",
    "properties": {"mediaType": _STRING, "digest": _STRING, "size": {"type": "integer"}},
    "required": ["mediaType", "digest", "size"],
}
USER_OBJECT = MediaOperation(
    "an image of the caller's account (scope user) or organization (scope group)",
    _CONTENT,
    tags=_TAGS,
)
NODE_BLOB = MediaOperation("content by its digest (the node token)", _CONTENT, tags=_TAGS)
NODE_OBJECT = MediaOperation(
    "the image object document of an object digest (the node token)",
    Body(
        MEDIA_TYPE,
        "the object: its content's digest and size, and its config's",
        {
            "type": "object",
            "properties": {
                "mediaType": {"type": "string", "enum": [MEDIA_TYPE]},
                "content": _SIZED,
                "config": {**_SIZED, "nullable": True},
            },
            "required": ["mediaType", "content", "config"],
        },
    ),
    tags=_TAGS,
)
NODE_CONFIG = MediaOperation(
    "an image config (the OCI config object) by its digest (the node token)",
    Body("application/json", "the config", {"type": "object"}),
    tags=_TAGS,
)
_DIGEST_REPLY = {"type": "object", "properties": {"digest": _STRING}, "required": ["digest"]}
STORE_CONFIG = JsonOperation(
    f"store an image's config (the OCI config object, at most {MAX_CONFIG_BYTES} bytes) before"
    " its content (the node token): its canonical document's digest",
    _DIGEST_REPLY,
    request={"type": "object"},
    tags=_TAGS,
)
STORE_CONFIG_BY_CONTENT = JsonOperation(
    "an older node's config after its content: always refused (404), configs are stored first",
    _DIGEST_REPLY,
    tags=_TAGS,
)
STORE = MediaOperation(
    "store a built image's content (the node token): its object digest, content digest and size",
    Body(
        "application/json",
        "the stored object",
        {
            "type": "object",
            "properties": {"digest": _STRING, "content": _STRING, "size": {"type": "integer"}},
            "required": ["digest", "content", "size"],
        },
    ),
    request=_CONTENT,
    query=(
        Query(
            "owner", "string", "the account (scope user) or organization (scope group) owning it"
        ),
        Query("definitionHash", "string", "the hash of the image's definition"),
        Query("ttl", "string", "seconds it is kept unused: a finite number from 0 (none: forever)"),
        Query("config", "string", "the digest of its config, stored before (none: no config)"),
    ),
    tags=_TAGS,
)


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

    @documented(USER_OBJECT)
    @any_thread
    async def user_object(request: web.Request) -> web.StreamResponse:
        held = cache(request)
        account_id = principal_of(request).account_id
        # another account's user images, another organization's group images: absent
        address = CacheAddress.checked(
            account_id,
            request.match_info["scope"],
            request.match_info["name"],
            group=held.group_of(account_id),
            field="path",
        )
        entry = held.lookup(address)
        if entry is None:
            raise NotFound(
                f"fuzzball://{address.scope}/{address.name}: no such image in the object cache"
            )
        return web.FileResponse(held.open_blob(entry.content))

    @documented(NODE_BLOB)
    @any_thread
    async def node_blob(request: web.Request) -> web.StreamResponse:
        return web.FileResponse(cache(request).open_blob(request.match_info["digest"]))

    @documented(NODE_OBJECT)
    @any_thread
    async def node_object(request: web.Request) -> web.StreamResponse:
        path = cache(request).open_object(request.match_info["digest"])
        return web.FileResponse(path, headers={"Content-Type": MEDIA_TYPE})

    @documented(NODE_CONFIG)
    @any_thread
    async def node_config(request: web.Request) -> web.StreamResponse:
        path = cache(request).open_config(request.match_info["digest"])
        return web.FileResponse(path, headers={"Content-Type": "application/json"})

    @documented(STORE)
    @any_thread
    async def node_store(request: web.Request) -> web.Response:
        held = cache(request)
        owner = request.query.get("owner", "")  # what Orchestrate told the node: either scope's
        address = CacheAddress.checked(
            owner,
            request.match_info["scope"],
            request.match_info["name"],
            group=owner,
            field="path",
        )
        ttl_text = request.query.get("ttl", "")
        try:
            ttl = float(ttl_text) if ttl_text else None
        except ValueError as exc:
            raise InvalidArgument(f"ttl: {ttl_text!r} is not a number of seconds") from exc
        if ttl is not None and not 0 <= ttl < math.inf:
            # NaN compares false with every time, so such an entry would never expire
            raise InvalidArgument(f"ttl: {ttl_text!r} is not a finite number of seconds from 0")
        config = request.query.get("config", "")
        if config:
            held.open_config(config)  # refused before the content is read, not after
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
                    config=config,
                    definition_hash=request.query.get("definitionHash", ""),
                    ttl=ttl,
                ),
            )
        return web.json_response(
            {"digest": entry.digest, "content": entry.content, "size": entry.size}
        )

    @documented(STORE_CONFIG)
    @any_thread
    async def node_store_config(request: web.Request) -> web.Response:
        if (request.content_length or 0) > MAX_CONFIG_BYTES:
            raise InvalidArgument(f"an image config is at most {MAX_CONFIG_BYTES} bytes")
        # the bytes as UTF-8 JSON, whatever charset the Content-Type names (request.json()
        # decodes with it, and an unknown one was a LookupError: a 500)
        document = parse_json_body(await request.read())
        if not isinstance(document, dict):
            raise InvalidArgument("the image config is not a JSON object")
        return web.json_response({"digest": cache(request).store_config(document)})

    @documented(STORE_CONFIG_BY_CONTENT)
    @any_thread
    async def node_store_config_by_content(request: web.Request) -> web.Response:
        raise NotFound(
            "configs are stored before their image's content (PUT node-objects/configs) since"
            " image objects: this node is older than Orchestrate"
        )

    app.router.add_get(f"{base}/objects/{{scope}}/{{name:.+}}", user_object)
    app.router.add_get(f"{base}/node-objects/blobs/{{digest}}", node_blob)
    app.router.add_get(f"{base}/node-objects/manifests/{{digest}}", node_object)
    app.router.add_get(f"{base}/node-objects/configs/{{digest}}", node_config)
    app.router.add_put(f"{base}/node-objects/configs", node_store_config)
    # before the store route, whose {scope}/{name} would match configs/DIGEST too
    app.router.add_put(f"{base}/node-objects/configs/{{digest}}", node_store_config_by_content)
    app.router.add_put(f"{base}/node-objects/{{scope}}/{{name:.+}}", node_store)
