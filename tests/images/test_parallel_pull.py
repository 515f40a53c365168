"""Parallel layer downloads: several blobs move at once, yet layers are applied in manifest
order and every blob is verified against its digest before it is used."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from support.erofs_contents import extract_erofs
from support.oci_pusher import busybox_entries, file, layer, pushed_image_uri
from support.registry_server import RegistryServer

from fuzzball_core.drivers import image_config_path
from fuzzball_plugins.images.blob_store import BlobStore
from fuzzball_plugins.images.docker_backend import DockerBackend
from fuzzball_plugins.images.registry_client import BlobDigestMismatch

CONFIG = {"platform": "linux/amd64", "retry": {"attempts": 3, "initial-delay": 0.1}}
#: how long a test waits for another download to make progress before calling it serial
PATIENCE = 60.0


def test_a_later_layer_downloads_while_an_earlier_one_is_still_downloading(
    own_registry: RegistryServer, cache_dir: Path
) -> None:
    lower = layer([file("big.bin", os.urandom(4 << 20))], compress=False)
    upper = layer([file("small.txt", b"small\n")])
    backend = DockerBackend(CONFIG)
    image = backend.resolve(pushed_image_uri(own_registry.host, "tests/parallel", [lower, upper]))
    upper_done = threading.Event()
    waited: list[bool] = []

    def hold_the_lower_layer_until_the_upper_is_done(step: str, done: int, total: int) -> None:
        if step == f"download {upper.digest}" and done == total:
            upper_done.set()
        elif step == f"download {lower.digest}" and not waited:
            # downloaded one after the other, the upper layer would never start meanwhile
            waited.append(upper_done.wait(PATIENCE))

    blobs = backend.download(
        image, cache_dir, progress=hold_the_lower_layer_until_the_upper_is_done
    ).blobs

    assert waited == [True]
    assert [path.read_bytes() for path in blobs] == [lower.blob, upper.blob]


def test_layers_finishing_out_of_order_are_applied_in_manifest_order(
    own_registry: RegistryServer, cache_dir: Path, tmp_path: Path
) -> None:
    base = layer(busybox_entries())
    lower = layer(
        [file("etc/motd", b"from the lower layer\n"), file("pad.bin", os.urandom(4 << 20))],
        compress=False,
    )
    upper = layer([file("etc/motd", b"from the upper layer\n")])
    backend = DockerBackend(CONFIG)
    image = backend.resolve(
        pushed_image_uri(own_registry.host, "tests/order", [base, lower, upper])
    )
    upper_done = threading.Event()

    def lower_finishes_last(step: str, done: int, total: int) -> None:
        if step == f"download {upper.digest}" and done == total:
            upper_done.set()
        elif step == f"download {lower.digest}" and done == total:
            upper_done.wait(PATIENCE)

    tree = extract_erofs(backend.fetch(image, cache_dir, progress=lower_finishes_last), tmp_path)

    assert upper_done.is_set()
    assert (tree / "etc/motd").read_bytes() == b"from the upper layer\n"
    assert (tree / "pad.bin").stat().st_size == 4 << 20


def test_a_corrupt_layer_among_good_ones_fails_the_pull_and_caches_nothing(
    own_registry: RegistryServer, cache_dir: Path
) -> None:
    layers = [
        layer(busybox_entries()),
        layer([file("data.bin", os.urandom(1 << 20))], compress=False),
        layer([file("note.txt", b"note\n")]),
    ]
    backend = DockerBackend(CONFIG)
    image = backend.resolve(pushed_image_uri(own_registry.host, "tests/one-corrupt", layers))
    corrupt = layers[1]
    stored = own_registry.blob_data_path(corrupt.digest)
    data = bytearray(stored.read_bytes())
    data[len(data) // 2] ^= 0xFF
    stored.write_bytes(bytes(data))

    with pytest.raises(BlobDigestMismatch, match=rf"blob {corrupt.digest} .* is corrupt"):
        backend.fetch(image, cache_dir)

    store = BlobStore(cache_dir)
    assert not store.has(corrupt.digest, len(corrupt.blob))
    cached = backend.image_cache(cache_dir).path_for(image.digest)
    assert not cached.exists() and not image_config_path(cached).exists()
    assert not list(cache_dir.rglob("*.partial"))
    assert not list((cache_dir / "scratch").iterdir())
