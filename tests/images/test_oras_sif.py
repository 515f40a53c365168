"""oras:// SIF artifacts: resolved by their SIF header's architecture, unpacked into EROFS."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from support.erofs_contents import extract_erofs
from support.oci_pusher import Pusher, layer
from support.registry_server import RegistryServer
from support.sif_writer import write_sif

from fuzzball_core.errors import InvalidArgument
from fuzzball_plugins.images.oras_backend import SIF_CONFIG, SIF_LAYER, OrasBackend
from fuzzball_plugins.images.sif import primary_partition

BACKEND = OrasBackend({"platform": "linux/amd64"})


def _rootfs(root: Path) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "bin/busybox").write_bytes(Path("/bin/busybox").read_bytes())
    (root / "bin/busybox").chmod(0o755)
    os.symlink("busybox", root / "bin/sh")
    (root / "home/user").mkdir(parents=True)
    (root / "home/user/hello.txt").write_text("hello from a SIF\n")
    os.chown(root / "home/user/hello.txt", 1000, 1000)
    return root


def _push_sif(registry: RegistryServer, tmp_path: Path, tag: str, arch: str) -> str:
    sif = write_sif(_rootfs(tmp_path / f"rootfs-{tag}"), tmp_path / f"{tag}.sif", arch=arch)
    pusher = Pusher(registry.url)
    try:
        pusher.push_artifact(
            "tests/sif",
            tag,
            sif.read_bytes(),
            media_type=SIF_LAYER,
            config_media_type=SIF_CONFIG,
            title=sif.name,
        )
    finally:
        pusher.close()
    return f"oras://{registry.host}/tests/sif:{tag}"


def test_sif_artifact_resolves_to_its_architecture(
    own_registry: RegistryServer, tmp_path: Path
) -> None:
    resolved = BACKEND.resolve(_push_sif(own_registry, tmp_path, "amd64", "amd64"))

    assert resolved.platform == "linux/amd64"
    assert resolved.uri == f"oras://{own_registry.host}/tests/sif:amd64"


def test_pinning_a_sif_tag_again_asks_the_registry_with_a_head_only(
    own_registry: RegistryServer, tmp_path: Path
) -> None:
    """The manifest, the SIF's header and its config are read once a manifest digest."""
    uri = _push_sif(own_registry, tmp_path, "again", "amd64")
    first = BACKEND.resolve(uri)
    before = len(own_registry.settled_access_log())

    again = BACKEND.resolve(uri)

    asked = own_registry.settled_access_log()[before:]
    assert [(r.method, r.path) for r in asked] == [("HEAD", "/v2/tests/sif/manifests/again")]
    assert again == first


def test_a_sif_pinned_under_another_tag_keeps_that_tag(
    own_registry: RegistryServer, tmp_path: Path
) -> None:
    first = BACKEND.resolve(_push_sif(own_registry, tmp_path, "one", "amd64"))
    pusher = Pusher(own_registry.url)
    try:  # the same manifest under a second tag
        document = pusher.http.get(
            f"{own_registry.url}/v2/tests/sif/manifests/one",
            headers={"Accept": "application/vnd.oci.image.manifest.v1+json"},
        ).json()
        assert pusher.push_manifest("tests/sif", "two", document)[0] == first.digest
    finally:
        pusher.close()

    second = BACKEND.resolve(f"oras://{own_registry.host}/tests/sif:two")

    assert second.digest == first.digest
    assert second.uri == f"oras://{own_registry.host}/tests/sif:two"


def test_sif_for_another_architecture_fails_at_resolve(
    own_registry: RegistryServer, tmp_path: Path
) -> None:
    uri = _push_sif(own_registry, tmp_path, "arm", "arm64")

    with pytest.raises(
        InvalidArgument, match=r"no linux/amd64 image in .*; available: linux/arm64"
    ):
        BACKEND.resolve(uri)


def test_container_image_is_not_a_sif_artifact(
    own_registry: RegistryServer, tmp_path: Path
) -> None:
    pusher = Pusher(own_registry.url)
    pusher.push_image("tests/notsif", "1", [layer([])])
    pusher.close()

    with pytest.raises(InvalidArgument, match="is not a SIF artifact"):
        BACKEND.resolve(f"oras://{own_registry.host}/tests/notsif:1")


def test_downloaded_sif_partition_unpacks_with_unsquashfs(
    own_registry: RegistryServer, tmp_path: Path, cache_dir: Path
) -> None:
    image = BACKEND.resolve(_push_sif(own_registry, tmp_path, "amd64", "amd64"))
    (sif,) = BACKEND.download(image, cache_dir).blobs
    partition = primary_partition(sif)

    out = tmp_path / "unpacked"
    subprocess.run(
        ["unsquashfs", "-no-progress", "-o", str(partition.offset), "-d", str(out), str(sif)],
        check=True,
        capture_output=True,
    )

    assert partition.architecture == "amd64"
    assert (out / "home/user/hello.txt").read_text() == "hello from a SIF\n"


def test_sif_is_fetched_into_an_erofs_with_its_tree(
    own_registry: RegistryServer, tmp_path: Path, cache_dir: Path
) -> None:
    image = BACKEND.resolve(_push_sif(own_registry, tmp_path, "amd64", "amd64"))

    erofs = BACKEND.fetch(image, cache_dir)

    tree = extract_erofs(erofs, tmp_path / "tree")
    assert (tree / "home/user/hello.txt").read_text() == "hello from a SIF\n"
    assert (tree / "home/user/hello.txt").stat().st_uid == 1000
    assert os.readlink(tree / "bin/sh") == "busybox"
    assert (tree / "bin/busybox").read_bytes() == Path("/bin/busybox").read_bytes()
