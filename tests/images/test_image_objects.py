"""Object-cache images are keyed by content AND config: two images with one root file system
and different configs (Env, Cmd, WorkingDir) are two image objects, pinned, stored and cached
on nodes apart, so each job runs with its own image's config; the content is still stored
once. A document, config or content that does not match its digest is refused."""

from __future__ import annotations

import json
import types
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.object_cache_server import ObjectCacheServer
from support.openapi_routes import document_adding, undescribed

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.drivers import ImageConfig, ResolvedImage
from fuzzball_core.errors import FailedPrecondition, InvalidArgument, NotFound
from fuzzball_core.image_objects import ImageObject, config_document, sha256_digest
from fuzzball_core.orchestrate.image_stages import ImageStages, pinned_uri
from fuzzball_core.orchestrate.object_cache_routes import object_cache_routes
from fuzzball_core.plugins import get_registry
from fuzzball_core.spec.models import Job
from fuzzball_core.store.models import CachedObject
from fuzzball_core.store.object_cache import CacheAddress
from fuzzball_core.substrate.drivers import RunRequest
from fuzzball_core.substrate.drivers.steps import job_command, job_environment
from fuzzball_core.substrate.images import NodeImages
from fuzzball_plugins.images.object_cache_backend import ObjectCacheBackend

ACCOUNT = "acct-1"
#: one root file system (the object cache treats an EROFS file as opaque bytes)
ROOTFS = b"one root file system\n" * 4096
CONFIG_A = ImageConfig(env=("GREETING=from-a",), cmd=("/bin/a",))
CONFIG_B = ImageConfig(env=("GREETING=from-b",), cmd=("/bin/b", "--b"), working_dir="/srv/b")


@pytest.fixture
def object_cache(tmp_path: Path) -> Iterator[ObjectCacheServer]:
    server = ObjectCacheServer(tmp_path / "orchestrate")
    yield server
    server.close()


def _store(server: ObjectCacheServer, workdir: Path, name: str, config: ImageConfig) -> dict:
    """Store ``ROOTFS`` run with ``config`` as the user's image ``name``, as a node's build
    stage does (the config beside the EROFS file); Orchestrate's answer."""
    image = workdir / name / "image.erofs"
    image.parent.mkdir(parents=True)
    image.write_bytes(ROOTFS)
    config.write_beside(image)
    target = {"owner": ACCOUNT, "scope": "user", "name": name, "definition-hash": ""}
    return ObjectCacheBackend({"object-cache-url": server.url}).store(target, image)


def _pin(server: ObjectCacheServer, name: str) -> ResolvedImage:
    """The image ``fuzzball://user/NAME`` pinned for a job as Orchestrate pins it."""
    stages = ImageStages(enabled=True, object_cache=server.cache)
    return stages.resolve(f"fuzzball://user/{name}", ACCOUNT)


def _node(server: ObjectCacheServer, directory: Path) -> NodeImages:
    return NodeImages(get_registry(), {"object-cache-url": server.url}, directory)


def _job_sees(node: NodeImages, pin: ResolvedImage) -> tuple[list[str], str, str]:
    """What a job of ``pin``'s image naming no command runs on ``node``: its argv, its
    GREETING and the image's WorkingDir."""
    config = node.config(node.ensure(pinned_uri(pin.uri, pin.digest))) or ImageConfig()
    job = {"image": {"uri": pin.uri}}
    request = RunRequest.from_assignment(
        node_pb2.Assignment(
            run_id=1, workflow_id="w1", stage_name="jobs.a", job_json=json.dumps(job)
        )
    )
    env = job_environment(request, "node-1", config)
    return job_command(Job.model_validate(job), None, config), env["GREETING"], config.working_dir


def test_two_images_of_one_root_file_system_run_with_their_own_configs(
    object_cache: ObjectCacheServer, tmp_path: Path
) -> None:
    _store(object_cache, tmp_path / "builds", "a", CONFIG_A)
    _store(object_cache, tmp_path / "builds", "b", CONFIG_B)
    a, b = _pin(object_cache, "a"), _pin(object_cache, "b")
    node = _node(object_cache, tmp_path / "node")

    assert a.digest != b.digest
    assert (a.config, b.config) == (CONFIG_A, CONFIG_B)  # what Orchestrate checks jobs against
    # one node, both images, in both orders of first use
    assert _job_sees(node, a) == (["/bin/a"], "from-a", "")
    assert _job_sees(node, b) == (["/bin/b", "--b"], "from-b", "/srv/b")
    assert _job_sees(_node(object_cache, tmp_path / "other"), b)[1] == "from-b"
    assert _job_sees(_node(object_cache, tmp_path / "other"), a)[1] == "from-a"


def test_the_content_is_stored_once_for_objects_that_differ_only_in_config(
    object_cache: ObjectCacheServer, tmp_path: Path
) -> None:
    a = _store(object_cache, tmp_path / "builds", "a", CONFIG_A)
    b = _store(object_cache, tmp_path / "builds", "b", CONFIG_B)
    again = _store(object_cache, tmp_path / "builds", "a-again", CONFIG_A)

    assert a["content"] == b["content"] == sha256_digest(ROOTFS)
    assert a["digest"] != b["digest"] and again["digest"] == a["digest"]
    assert [p.name for p in (object_cache.cache.directory / "blobs").iterdir()] == [
        a["content"].partition(":")[2]
    ]


def test_a_node_cache_entry_keyed_by_content_alone_is_never_used_for_an_object(
    object_cache: ObjectCacheServer, tmp_path: Path
) -> None:
    _store(object_cache, tmp_path / "builds", "b", CONFIG_B)
    b = _pin(object_cache, "b")
    node = _node(object_cache, tmp_path / "node")
    # what a node kept before image objects: the content under its own digest, with the config
    # of whichever image of that content it fetched first
    legacy = (
        tmp_path / "node" / "images" / f"sha256-{sha256_digest(ROOTFS).partition(':')[2]}.erofs"
    )
    legacy.parent.mkdir(parents=True)
    legacy.write_bytes(ROOTFS)
    CONFIG_A.write_beside(legacy)

    path = node.ensure(pinned_uri(b.uri, b.digest))

    assert path != legacy and node.config(path) == CONFIG_B


def test_a_second_use_of_an_object_on_a_node_is_a_cache_lookup(
    object_cache: ObjectCacheServer, tmp_path: Path
) -> None:
    _store(object_cache, tmp_path / "builds", "a", CONFIG_A)
    a = _pin(object_cache, "a")
    backend = ObjectCacheBackend({"object-cache-url": object_cache.url})
    first = backend.fetch(a, tmp_path / "node")
    steps: list[str] = []

    again = backend.fetch(a, tmp_path / "node", progress=lambda step, *_: steps.append(step))

    assert again == first and steps == ["done"]


def test_an_object_document_that_does_not_match_its_digest_is_refused(
    object_cache: ObjectCacheServer, tmp_path: Path
) -> None:
    _store(object_cache, tmp_path / "builds", "a", CONFIG_B)
    _store(object_cache, tmp_path / "builds", "b", CONFIG_A)
    a, b = _pin(object_cache, "a"), _pin(object_cache, "b")
    # the document of a replaced by b's: a's digest must not fetch b's config
    object_cache.cache.object_path(a.digest).write_bytes(
        object_cache.cache.object_path(b.digest).read_bytes()
    )
    backend = ObjectCacheBackend({"object-cache-url": object_cache.url})

    with pytest.raises(InvalidArgument, match=f"image object document for {a.digest} does not"):
        backend.fetch(a, tmp_path / "node")
    assert not list((tmp_path / "node" / "images").glob("*.erofs"))


def test_a_config_that_does_not_match_its_digest_is_refused(
    object_cache: ObjectCacheServer, tmp_path: Path
) -> None:
    stored = _store(object_cache, tmp_path / "builds", "a", CONFIG_A)
    held = ImageObject.parse(
        object_cache.cache.object_path(stored["digest"]).read_bytes(), stored["digest"]
    )
    object_cache.cache.config_path(held.config).write_bytes(config_document(CONFIG_B))
    backend = ObjectCacheBackend({"object-cache-url": object_cache.url})

    with pytest.raises(InvalidArgument, match=f"config {held.config} does not match its digest"):
        backend.fetch(_pin(object_cache, "a"), tmp_path / "node")


def test_a_document_is_read_only_under_its_own_digest() -> None:
    held = ImageObject.of(sha256_digest(ROOTFS), len(ROOTFS), CONFIG_A)
    document = held.document()

    assert ImageObject.parse(document, held.digest) == held
    assert held.digest != ImageObject.of(held.content, held.size, CONFIG_B).digest  # config
    assert held.digest != ImageObject.of(held.content, held.size, None).digest
    other = ImageObject.of(held.content, held.size, CONFIG_B)
    with pytest.raises(InvalidArgument, match="does not match its digest"):
        ImageObject.parse(
            document.replace(held.config.encode(), other.config.encode()), held.digest
        )
    with pytest.raises(InvalidArgument, match="not an image object document"):
        ImageObject.parse(b"{}", sha256_digest(b"{}"))
    with pytest.raises(InvalidArgument, match="not a sha256 digest"):
        ImageObject.parse(document, "sha256:abc")


def test_a_pin_to_content_alone_from_before_image_objects_is_refused_not_guessed(
    object_cache: ObjectCacheServer, tmp_path: Path
) -> None:
    content = _store(object_cache, tmp_path / "builds", "a", CONFIG_A)["content"]
    _store(object_cache, tmp_path / "builds", "b", CONFIG_B)
    backend = ObjectCacheBackend({"object-cache-url": object_cache.url})
    absent = sha256_digest(b"nothing")

    with pytest.raises(FailedPrecondition, match="pinned to its content alone"):
        backend.fetch(ResolvedImage("fuzzball://user/a", content, 0, ""), tmp_path / "node")
    with pytest.raises(NotFound, match=f"holds no image {absent}"):
        backend.fetch(ResolvedImage("fuzzball://user/a", absent, 0, ""), tmp_path / "node")


def test_an_entry_stored_before_image_objects_becomes_the_object_it_was_served_as(
    object_cache: ObjectCacheServer, tmp_path: Path
) -> None:
    cache = object_cache.cache
    content = sha256_digest(ROOTFS)
    # as the old code kept it: the entry names the content, the config lies beside it
    blob = cache.blob_path(content)
    blob.write_bytes(ROOTFS)
    blob.with_name(f"{blob.name}.config.json").write_text(json.dumps(CONFIG_A.as_oci()))
    with cache.sessions() as session, session.begin():
        session.add(
            CachedObject(
                owner=ACCOUNT,
                scope="user",
                name="old",
                digest=content,
                size=len(ROOTFS),
                definition_hash="",
                created_at=0.0,
            )
        )

    entry = cache.lookup(CacheAddress(ACCOUNT, "user", "old"))

    assert entry is not None and entry.content == content and entry.digest != content
    assert cache.lookup(CacheAddress(ACCOUNT, "user", "old")) == entry
    old = _pin(object_cache, "old")
    assert (old.digest, old.config) == (entry.digest, CONFIG_A)
    assert _job_sees(_node(object_cache, tmp_path / "node"), old)[1] == "from-a"


def test_the_object_cache_refuses_content_naming_a_config_it_does_not_hold(
    object_cache: ObjectCacheServer,
) -> None:
    address = f"{object_cache.url}/v3/node-objects/user/a"
    unknown = sha256_digest(b"no such config")

    refused = httpx.put(address, params={"owner": ACCOUNT, "config": unknown}, content=ROOTFS)
    # a node older than image objects sends its config by content digest, after the content
    late = httpx.put(
        f"{object_cache.url}/v3/node-objects/configs/{sha256_digest(ROOTFS)}",
        json=CONFIG_A.as_oci(),
    )

    assert refused.status_code == 404 and "holds no config" in refused.text
    assert object_cache.cache.lookup(CacheAddress(ACCOUNT, "user", "a")) is None
    assert late.status_code == 404 and "older than Orchestrate" in late.text


def test_the_openapi_document_describes_every_object_cache_route():
    document, routes = document_adding(object_cache_routes(types.SimpleNamespace()))
    assert "PUT /v3/node-objects/{scope}/{name}" in routes
    assert undescribed(document, routes) == set()
