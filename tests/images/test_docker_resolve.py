"""Resolving docker:// references against a real registry: pinning, platforms, failures."""

from __future__ import annotations

import pytest
from support.oci_pusher import Pusher, file, layer
from support.registry_images import SharedImages
from support.registry_server import RegistryServer, free_port

from fuzzball_core.errors import InvalidArgument, NotFound, Unavailable
from fuzzball_plugins.images.docker_backend import DockerBackend
from fuzzball_plugins.images.registry_client import RegistryClient

AMD64 = {"platform": "linux/amd64"}


def test_resolve_by_tag_pins_the_manifest_digest(
    registry: RegistryServer, test_images: SharedImages
) -> None:
    resolved = DockerBackend(AMD64).resolve(f"docker://{registry.host}/tests/single:1")

    assert resolved.digest == test_images.single.digest
    assert resolved.uri == f"docker://{registry.host}/tests/single:1"
    assert resolved.platform == "linux/amd64"
    config_size = registry.blob_data_path(test_images.single.config_digest).stat().st_size
    layer_sizes = sum(len(item.blob) for item in test_images.single.layers)
    assert resolved.size == config_size + layer_sizes


def test_resolve_by_digest_keeps_the_digest(
    registry: RegistryServer, test_images: SharedImages
) -> None:
    uri = f"docker://{registry.host}/tests/layered@{test_images.layered.digest}"

    resolved = DockerBackend(AMD64).resolve(uri)

    assert resolved.digest == test_images.layered.digest


def test_index_resolves_to_the_node_architecture(
    registry: RegistryServer, test_images: SharedImages
) -> None:
    resolved = DockerBackend(AMD64).resolve(f"docker://{registry.host}/tests/multi:1")

    assert resolved.digest == test_images.multi_amd64.digest
    assert resolved.annotations["index-digest"] == test_images.multi_index_digest


def test_index_resolves_to_arm64_on_an_arm64_node(
    registry: RegistryServer, test_images: SharedImages
) -> None:
    backend = DockerBackend({"platform": "linux/arm64"})

    resolved = backend.resolve(f"docker://{registry.host}/tests/multi:1")

    assert resolved.digest == test_images.multi_arm64.digest
    assert resolved.platform == "linux/arm64"


def test_single_arch_image_for_another_arch_fails_at_resolve(
    registry: RegistryServer, test_images: SharedImages
) -> None:
    with pytest.raises(InvalidArgument) as error:
        DockerBackend(AMD64).resolve(f"docker://{registry.host}/tests/armonly:1")

    assert str(error.value) == (
        f"no linux/amd64 image in {registry.host}/tests/armonly:1; available: linux/arm64"
    )


def test_index_without_the_node_architecture_lists_what_it_has(
    registry: RegistryServer, test_images: SharedImages
) -> None:
    backend = DockerBackend({"platform": "linux/s390x"})

    with pytest.raises(InvalidArgument, match=r"available: linux/amd64, linux/arm64$"):
        backend.resolve(f"docker://{registry.host}/tests/multi:1")


def test_missing_tag_is_not_found(registry: RegistryServer, test_images: SharedImages) -> None:
    with pytest.raises(NotFound, match=rf"{registry.host}/tests/single:nope"):
        DockerBackend(AMD64).resolve(f"docker://{registry.host}/tests/single:nope")


def test_missing_repository_is_not_found(registry: RegistryServer) -> None:
    with pytest.raises(NotFound):
        DockerBackend(AMD64).resolve(f"docker://{registry.host}/tests/never-pushed:1")


def test_unreachable_registry_is_unavailable() -> None:
    backend = DockerBackend({**AMD64, "retry": {"attempts": 2, "initial-delay": 0.01}})
    host = f"127.0.0.1:{free_port()}"

    with pytest.raises(Unavailable, match=rf"registry {host} is unreachable"):
        backend.resolve(f"docker://{host}/tests/single:1")


def test_docker_hub_names_are_normalised_and_served_by_a_mirror(
    registry: RegistryServer, test_images: SharedImages
) -> None:
    backend = DockerBackend({**AMD64, "registries": {"docker.io": {"mirrors": [registry.url]}}})

    resolved = backend.resolve("alpine")

    assert resolved.uri == "docker://docker.io/library/alpine:latest"
    assert resolved.digest == test_images.hub_alpine.digest


def test_mirrors_are_tried_in_order_before_the_registry(
    registry: RegistryServer, test_images: SharedImages
) -> None:
    dead_mirror = f"http://127.0.0.1:{free_port()}"
    config = {
        **AMD64,
        "retry": {"attempts": 1},
        "registries": {"docker.io": {"mirrors": [dead_mirror, registry.url]}},
    }

    resolved = DockerBackend(config).resolve("docker.io/library/alpine:latest")

    assert resolved.digest == test_images.hub_alpine.digest


def test_mirror_urls_must_name_a_scheme() -> None:
    with pytest.raises(InvalidArgument, match=r"registries\.docker\.io\.mirrors\[0\]"):
        DockerBackend({"registries": {"docker.io": {"mirrors": ["127.0.0.1:5000"]}}})


def test_pinning_a_tag_again_asks_the_registry_with_a_head_only(
    own_registry: RegistryServer,
) -> None:
    """The manifest and config are named by their digests: pinned once, they are not fetched
    again; the tag is asked with a HEAD at every pin (Docker Hub counts a GET of a manifest
    as a pull), and a tag moved to another image is pinned to the new image and its
    config."""
    pusher = Pusher(own_registry.url)
    first = pusher.push_image("tests/moving", "1", [layer([file("a", b"first\n")])])
    uri = f"docker://{own_registry.host}/tests/moving:1"

    def requests() -> tuple[int, int, int]:
        log = own_registry.access_log()
        heads = sum(1 for r in log if r.method == "HEAD" and "/manifests/" in r.path)
        manifests = sum(1 for r in log if r.method == "GET" and "/manifests/" in r.path)
        return heads, manifests, sum(1 for r in log if r.method == "GET" and "/blobs/" in r.path)

    before = requests()
    assert DockerBackend(AMD64).resolve(uri).digest == first.digest
    once = requests()
    assert DockerBackend(AMD64).resolve(uri).digest == first.digest
    twice = requests()
    moved = pusher.push_image(
        "tests/moving", "1", [layer([file("a", b"second\n")])], config_extra={"User": "1"}
    )
    pusher.close()
    resolved = DockerBackend(AMD64).resolve(uri)

    assert once == (before[0] + 1, before[1] + 1, before[2] + 1)
    assert twice == (once[0] + 1, once[1], once[2])  # a HEAD only
    assert resolved.digest == moved.digest != first.digest
    assert resolved.config is not None and resolved.config.user == "1"
    assert requests() == (twice[0] + 1, twice[1] + 1, twice[2] + 1)  # the new image's


def test_pinning_an_index_again_asks_the_registry_with_a_head_only(
    registry: RegistryServer, test_images: SharedImages
) -> None:
    uri = f"docker://{registry.host}/tests/multi:1"
    DockerBackend(AMD64).resolve(uri)
    before = len(registry.settled_access_log())

    resolved = DockerBackend(AMD64).resolve(uri)

    assert resolved.digest == test_images.multi_amd64.digest
    asked = registry.settled_access_log()[before:]
    assert [(r.method, r.path) for r in asked] == [("HEAD", "/v2/tests/multi/manifests/1")]


def _pushed(server: RegistryServer, repository: str) -> tuple[str, str]:
    """An image of one small layer pushed as ``repository:1``: its URI and digest."""
    pusher = Pusher(server.url)
    try:
        pushed = pusher.push_image(repository, "1", [layer([file("a", repository.encode())])])
    finally:
        pusher.close()
    return f"docker://{server.host}/{repository}:1", pushed.digest


def test_a_tag_the_registry_names_no_digest_for_is_pinned_from_its_manifest(
    own_registry: RegistryServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri, digest = _pushed(own_registry, "tests/nameless")
    DockerBackend(AMD64).resolve(uri)
    monkeypatch.setattr(RegistryClient, "head_manifest", lambda self, reference=None: None)
    before = len(own_registry.settled_access_log())

    assert DockerBackend(AMD64).resolve(uri).digest == digest
    assert [r.method for r in own_registry.settled_access_log()[before:]] == ["GET"]


def test_a_registry_refusing_a_head_is_asked_with_a_get(
    own_registry: RegistryServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri, digest = _pushed(own_registry, "tests/headless")

    def refused(self: RegistryClient, reference: str | None = None) -> str | None:
        raise InvalidArgument("registry refused image: HTTP 405")

    monkeypatch.setattr(RegistryClient, "head_manifest", refused)
    assert DockerBackend(AMD64).resolve(uri).digest == digest


def test_a_missing_tag_is_not_found_from_its_head(
    registry: RegistryServer, test_images: SharedImages
) -> None:
    before = len(registry.settled_access_log())

    with pytest.raises(NotFound, match=r"tests/single:gone not found in registry"):
        DockerBackend(AMD64).resolve(f"docker://{registry.host}/tests/single:gone")
    assert [r.method for r in registry.settled_access_log()[before:]] == ["HEAD"]
