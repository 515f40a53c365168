"""A second node's cold start from the object cache: the EROFS file a first node pulled and
wrote back is fetched from Orchestrate, verified, and filed under the image's own digest,
instead of the layers being pulled from the registry and converted again.

The stored copy's URI is pinned to its object digest (content and config); its content has a
digest of its own (the ``download`` step's)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.erofs_contents import extract_erofs
from support.object_cache_server import ObjectCacheServer
from support.oci_pusher import Pusher, busybox_entries, file, layer
from support.registry_server import RegistryServer

from fuzzball_core.drivers import ImageConfig, ResolvedImage
from fuzzball_core.orchestrate.image_stages import ImageStages, write_back_name
from fuzzball_core.plugins import get_registry
from fuzzball_core.spec import parse_workflow, plan_workflow
from fuzzball_core.substrate.images import NodeImages
from fuzzball_plugins.images.docker_backend import DockerBackend
from fuzzball_plugins.images.object_cache_backend import ObjectCacheBackend

PLATFORM = {"platform": "linux/amd64"}
#: the account whose pulls write back: one of no organization (not in the store), its own
#: group
ACCOUNT = "acct"


@pytest.fixture
def object_cache(tmp_path: Path) -> Iterator[ObjectCacheServer]:
    server = ObjectCacheServer(tmp_path / "orchestrate")
    yield server
    server.close()


def _written_back(
    registry: RegistryServer,
    object_cache: ObjectCacheServer,
    node_a: Path,
    tag: str = "1",
    config: dict[str, Any] | None = None,
) -> tuple[str, ResolvedImage, Path, str, str]:
    """Push an image (its config's ``config`` object updated with ``config``), pull it on
    node A and write it back as node A's pull stage does; returns the URI, the pinned image,
    node A's EROFS file, the stored copy's URI and its content digest."""
    layers = [layer(busybox_entries()), layer([file("etc/motd", b"hello from the cache\n")])]
    pusher = Pusher(registry.url)
    pusher.push_image("tests/shared", tag, layers, config_extra=config)
    pusher.close()
    uri = f"docker://{registry.host}/tests/shared:{tag}"
    image = DockerBackend(PLATFORM).resolve(uri)
    erofs = DockerBackend(PLATFORM).fetch(image, node_a)
    name = write_back_name(uri)
    target = {"owner": ACCOUNT, "scope": "group", "name": name, "definition-hash": image.digest}
    stored = ObjectCacheBackend({"object-cache-url": object_cache.url}).store(target, erofs)
    return uri, image, erofs, f"fuzzball://group/{name}@{stored['digest']}", stored["content"]


def _blob_gets(registry: RegistryServer) -> int:
    return sum(1 for r in registry.access_log() if r.method == "GET" and "/blobs/" in r.path)


def test_a_second_node_gets_the_written_back_copy_without_the_registrys_layers(
    own_registry: RegistryServer, object_cache: ObjectCacheServer, tmp_path: Path
) -> None:
    uri, image, erofs, cached, content = _written_back(own_registry, object_cache, tmp_path / "a")
    gets_before = _blob_gets(own_registry)
    node_b = NodeImages(
        get_registry(), {**PLATFORM, "object-cache-url": object_cache.url}, tmp_path / "b"
    )
    steps: list[str] = []

    path = node_b.ensure(
        uri,
        digest=image.digest,
        cached=cached,
        progress=lambda step, done, total: steps.append(step),
    )

    assert path.read_bytes() == erofs.read_bytes()
    assert _blob_gets(own_registry) == gets_before
    assert f"download {content}" in steps
    assert ImageConfig.read_beside(path) == ImageConfig.read_beside(erofs)
    # filed under the image's own digest: a job's pull of the same image is a cache lookup
    assert DockerBackend(PLATFORM).fetch(image, tmp_path / "b") == path
    assert _blob_gets(own_registry) == gets_before


def test_copies_of_two_images_of_the_same_layers_keep_their_own_configs(
    own_registry: RegistryServer, object_cache: ObjectCacheServer, tmp_path: Path
) -> None:
    # one base, two images that differ only in ENV and CMD (FROM base + ENV, say): the same
    # layers, two manifest digests (each covers its config); a conversion that made the same
    # EROFS bytes of the same layers would store one content for both
    a = _written_back(
        own_registry, object_cache, tmp_path / "a", "env-a", {"Env": ["V=a"], "Cmd": ["/a"]}
    )
    b = _written_back(
        own_registry, object_cache, tmp_path / "a", "env-b", {"Env": ["V=b"], "Cmd": ["/b"]}
    )
    node_b = NodeImages(
        get_registry(), {**PLATFORM, "object-cache-url": object_cache.url}, tmp_path / "b"
    )

    path_a = node_b.ensure(a[0], digest=a[1].digest, cached=a[3])
    path_b = node_b.ensure(b[0], digest=b[1].digest, cached=b[3])

    assert a[3] != b[3]
    assert node_b.config(path_a) == ImageConfig(env=("V=a",), cmd=("/a",))
    assert node_b.config(path_b) == ImageConfig(env=("V=b",), cmd=("/b",))


def test_a_corrupt_copy_is_refused_and_the_image_is_pulled_from_the_registry(
    own_registry: RegistryServer, object_cache: ObjectCacheServer, tmp_path: Path
) -> None:
    uri, image, _, cached, content = _written_back(own_registry, object_cache, tmp_path / "a")
    blob = object_cache.cache.blob_path(content)
    data = bytearray(blob.read_bytes())
    data[len(data) // 2] ^= 0xFF
    blob.write_bytes(bytes(data))
    gets_before = _blob_gets(own_registry)
    node_b = NodeImages(
        get_registry(), {**PLATFORM, "object-cache-url": object_cache.url}, tmp_path / "b"
    )

    path = node_b.ensure(uri, digest=image.digest, cached=cached)

    assert path.read_bytes() != bytes(data)
    assert _blob_gets(own_registry) == gets_before + 3  # both layers and the config
    tree = extract_erofs(path, tmp_path / "tree")
    assert (tree / "etc/motd").read_bytes() == b"hello from the cache\n"


def test_a_pull_of_an_image_the_object_cache_holds_names_that_copy(
    own_registry: RegistryServer, object_cache: ObjectCacheServer, tmp_path: Path
) -> None:
    uri, image, _, cached, _ = _written_back(own_registry, object_cache, tmp_path / "a")
    workflow = f"version: v1\njobs:\n  a: {{image: {{uri: '{uri}'}}, command: [/bin/true]}}\n"
    pull = plan_workflow(parse_workflow(workflow), pull_stages=True).stages[f"images.{uri}"]
    stages = ImageStages(enabled=True, write_back=True, object_cache=object_cache.cache)

    payload = json.loads(stages.pull_payload(pull.definition, image, ACCOUNT))
    other = ResolvedImage(image.uri, "sha256:" + "0" * 64, 0, "")
    elsewhere = json.loads(stages.pull_payload(pull.definition, other, ACCOUNT))

    assert payload["cached"] == cached and payload["write-back"] is None
    assert elsewhere["cached"] == "" and elsewhere["write-back"] is not None
