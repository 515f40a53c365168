"""Images on the node: the backend chosen by URI scheme, pulled once, then served cached."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cluster import LocalRegistry
from support.oci_pusher import Pusher, busybox_entries, file, layer

from fuzzball_core.errors import InvalidArgument, NotFound
from fuzzball_core.plugins import get_registry
from fuzzball_core.substrate.images import NodeImages, uri_scheme


@pytest.mark.parametrize(
    ("uri", "scheme"),
    [("docker://alpine:latest", "docker"), ("alpine", "docker"), ("ORAS://r/x:1", "oras")],
)
def test_the_scheme_of_an_image_uri_picks_its_backend(uri: str, scheme: str) -> None:
    assert uri_scheme(uri) == scheme


def test_a_scheme_no_backend_serves_is_refused_naming_the_installed_ones(tmp_path: Path) -> None:
    images = NodeImages(get_registry(), {}, tmp_path)

    with pytest.raises(InvalidArgument, match=r"'ftp'.*docker"):
        images.ensure("ftp://example.com/image")


def test_an_image_is_pulled_once_and_then_served_from_the_cache(
    tmp_path: Path, images_config: dict[str, object], local_registry: LocalRegistry
) -> None:
    images = NodeImages(get_registry(), images_config, tmp_path)

    first = images.ensure("docker://alpine:latest")
    requests_after_first = len(local_registry.server.access_log())
    second = images.ensure("docker://alpine:latest")

    assert first == second
    assert first.suffix == ".erofs" and first.is_file()
    assert len(local_registry.server.access_log()) == requests_after_first


def test_a_pin_that_expired_resolves_again_but_reuses_the_converted_file(
    tmp_path: Path, images_config: dict[str, object]
) -> None:
    now = [0.0]
    images = NodeImages(get_registry(), images_config, tmp_path, clock=lambda: now[0])
    first = images.ensure("docker://alpine:latest")
    modified = first.stat().st_mtime_ns

    now[0] += 3600
    second = images.ensure("docker://alpine:latest")

    assert second == first
    assert second.stat().st_ino == first.stat().st_ino
    assert modified <= second.stat().st_mtime_ns


def test_a_missing_image_raises_the_backends_not_found(
    tmp_path: Path, images_config: dict[str, object]
) -> None:
    images = NodeImages(get_registry(), images_config, tmp_path)

    with pytest.raises(NotFound):
        images.ensure("docker://library/no-such-image:1")


def test_an_image_made_ready_at_its_digest_is_ready_until_it_leaves_the_cache(
    tmp_path: Path, images_config: dict[str, object]
) -> None:
    images = NodeImages(get_registry(), images_config, tmp_path)
    uri = "docker://alpine:latest"
    digest = images.backend("docker").resolve(uri).digest
    assert images.ready(uri, digest) is None

    path = images.ensure(uri, digest=digest)
    assert images.ready(uri, digest) == path
    assert images.ready(uri, "sha256:" + "0" * 64) is None

    path.unlink()  # evicted
    assert images.ready(uri, digest) is None


def _push_moving(local_registry: LocalRegistry, release: bytes) -> None:
    """``library/moving:1`` (a repository of this test's own) as an image saying ``release``."""
    pusher = Pusher(local_registry.url)
    try:
        pusher.push_image(
            "library/moving", "1", [layer(busybox_entries()), layer([file("etc/r", release)])]
        )
    finally:
        pusher.close()


def test_a_uri_with_its_digest_attached_is_that_digests_image_after_the_tag_moved(
    tmp_path: Path, images_config: dict[str, object], local_registry: LocalRegistry
) -> None:
    # a job's URI comes pinned by its submission: a tag pushed again since is not followed
    images = NodeImages(get_registry(), images_config, tmp_path)
    uri = "docker://moving:1"
    _push_moving(local_registry, b"first\n")
    submitted = images.backend("docker").resolve(uri).digest
    _push_moving(local_registry, b"second\n")
    assert images.backend("docker").resolve(uri).digest != submitted

    path = images.ensure(f"{uri}@{submitted}")

    assert images.ready(uri, submitted) == path
    assert images.ensure(uri) != path  # the tag itself is the new image


def test_a_uri_with_its_digest_attached_is_pinned_once_ready_at_that_digest(
    tmp_path: Path, images_config: dict[str, object]
) -> None:
    images = NodeImages(get_registry(), images_config, tmp_path)
    uri = "docker://alpine:latest"
    digest = images.backend("docker").resolve(uri).digest
    assert images.pinned(f"{uri}@{digest}") is None

    path = images.ensure(uri, digest=digest)  # the pull stage's

    assert images.pinned(f"{uri}@{digest}") == path
    assert images.pinned(f"{uri}@sha256:{'0' * 64}") is None
