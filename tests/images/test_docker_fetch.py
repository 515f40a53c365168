"""docker:// images fetched end to end: layers pulled, flattened into EROFS, cached by digest."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from support.erofs_contents import extract_erofs
from support.oci_pusher import Pusher, busybox_entries, layer
from support.registry_images import SharedImages
from support.registry_server import RegistryServer

from fuzzball_plugins.images.docker_backend import DockerBackend

CONFIG = {"platform": "linux/amd64"}


def test_pull_by_tag_gives_an_erofs_with_the_image_tree(
    registry: RegistryServer, test_images: SharedImages, cache_dir: Path, tmp_path: Path
) -> None:
    backend = DockerBackend(CONFIG)
    image = backend.resolve(f"docker://{registry.host}/tests/single:1")

    erofs = backend.fetch(image, cache_dir)

    tree = extract_erofs(erofs, tmp_path / "tree")
    assert (tree / "bin/busybox").read_bytes() == Path("/bin/busybox").read_bytes()
    assert os.readlink(tree / "bin/sh") == "busybox"


def test_pull_by_digest_applies_whiteouts_opaque_dirs_and_ownership(
    registry: RegistryServer, test_images: SharedImages, cache_dir: Path, tmp_path: Path
) -> None:
    backend = DockerBackend(CONFIG)
    image = backend.resolve(f"docker://{registry.host}/tests/layered@{test_images.layered.digest}")

    tree = extract_erofs(backend.fetch(image, cache_dir), tmp_path / "tree")

    assert not (tree / "etc/obsolete.conf").exists()
    assert sorted(p.name for p in (tree / "opt/old").iterdir()) == ["b.txt"]
    assert (tree / "home/user/notes.txt").stat().st_uid == 1000
    assert (tree / "home/user/data.bin").stat().st_gid == 1000
    assert not list(tree.rglob(".wh.*"))


def test_index_pull_gets_the_amd64_image(
    registry: RegistryServer, test_images: SharedImages, cache_dir: Path, tmp_path: Path
) -> None:
    backend = DockerBackend(CONFIG)
    image = backend.resolve(f"docker://{registry.host}/tests/multi:1")

    tree = extract_erofs(backend.fetch(image, cache_dir), tmp_path / "tree")

    assert (tree / "arch").read_text() == "amd64\n"


def test_docker_hub_image_is_pulled_through_the_mirror(
    registry: RegistryServer, test_images: SharedImages, cache_dir: Path, tmp_path: Path
) -> None:
    backend = DockerBackend({**CONFIG, "registries": {"docker.io": {"mirrors": [registry.url]}}})
    image = backend.resolve("alpine:latest")

    tree = extract_erofs(backend.fetch(image, cache_dir), tmp_path / "tree")

    assert (tree / "etc/alpine-release").read_text() == "3.99.0\n"


def test_second_use_is_a_cache_lookup_without_the_registry(
    own_registry: RegistryServer, cache_dir: Path
) -> None:
    pusher = Pusher(own_registry.url)
    pusher.push_image("tests/cached", "1", [layer(busybox_entries())])
    pusher.close()
    backend = DockerBackend(CONFIG)
    image = backend.resolve(f"docker://{own_registry.host}/tests/cached:1")
    first = backend.fetch(image, cache_dir)
    own_registry.kill()
    steps: list[str] = []

    second = backend.fetch(image, cache_dir, progress=lambda step, done, total: steps.append(step))

    assert second == first
    assert steps == ["done"]


def test_fetch_reports_resolve_download_convert_and_done(
    registry: RegistryServer, test_images: SharedImages, cache_dir: Path
) -> None:
    backend = DockerBackend(CONFIG)
    image = backend.resolve(f"docker://{registry.host}/tests/layered:1")
    steps: list[str] = []

    backend.fetch(image, cache_dir, progress=lambda step, done, total: steps.append(step))

    layer_steps = {f"download {item.digest}" for item in test_images.layered.layers}
    assert steps[0] == "resolve"
    assert layer_steps <= set(steps)
    assert steps[-2:] == ["convert", "done"]


def test_concurrent_fetches_of_one_image_pull_and_convert_once(
    own_registry: RegistryServer, cache_dir: Path
) -> None:
    base = layer(busybox_entries())
    pusher = Pusher(own_registry.url)
    pusher.push_image("tests/together", "1", [base])
    pusher.close()
    image = DockerBackend(CONFIG).resolve(f"docker://{own_registry.host}/tests/together:1")
    start = threading.Barrier(2)
    conversions: list[str] = []
    results: list[Path] = []

    def fetch() -> None:
        start.wait()

        def count(step: str, done: int, total: int) -> None:
            if step == "convert" and done == 0:
                conversions.append(step)

        results.append(DockerBackend(CONFIG).fetch(image, cache_dir, progress=count))

    threads = [threading.Thread(target=fetch) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(results) == 2 and results[0] == results[1]
    assert len(conversions) == 1
    assert len(own_registry.blob_gets(base.digest)) == 1


def test_docker_manifest_list_pull_gets_the_amd64_image(
    registry: RegistryServer, test_images: SharedImages, cache_dir: Path, tmp_path: Path
) -> None:
    backend = DockerBackend(CONFIG)
    image = backend.resolve(f"docker://{registry.host}/tests/dockerlist:1")

    tree = extract_erofs(backend.fetch(image, cache_dir), tmp_path / "tree")

    assert image.digest == test_images.docker_amd64.digest
    assert image.annotations["index-digest"] == test_images.docker_list_digest
    assert (tree / "format").read_text() == "docker\n"


def test_a_downloaded_layer_is_reported_done_once(
    registry: RegistryServer, test_images: SharedImages, cache_dir: Path
) -> None:
    backend = DockerBackend(CONFIG)
    image = backend.resolve(f"docker://{registry.host}/tests/layered:1")
    reports: list[tuple[str, int, int]] = []

    backend.fetch(image, cache_dir, progress=lambda *report: reports.append(report))

    for item in test_images.layered.layers:
        step = f"download {item.digest}"
        whole = [r for r in reports if r[0] == step and r[1] == r[2]]
        assert len(whole) == 1, [r for r in reports if r[0] == step]
