"""Layer downloads: digests verified, interrupted downloads resumed, concurrent pulls coalesced."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from support.oci_pusher import busybox_entries, file, layer, pushed_image_uri
from support.registry_server import RegistryServer

from fuzzball_plugins.images.blob_store import BlobStore
from fuzzball_plugins.images.docker_backend import DockerBackend
from fuzzball_plugins.images.registry_client import BlobDigestMismatch

CONFIG = {"platform": "linux/amd64", "retry": {"attempts": 10, "initial-delay": 0.2}}


def test_downloaded_blobs_match_their_digests(
    own_registry: RegistryServer, cache_dir: Path
) -> None:
    layers = [layer(busybox_entries()), layer([file("hello", b"hi\n")])]
    backend = DockerBackend(CONFIG)
    image = backend.resolve(pushed_image_uri(own_registry.host, "tests/plain", layers))

    paths = backend.download(image, cache_dir).blobs

    assert [p.read_bytes() for p in paths] == [item.blob for item in layers]
    assert not list(cache_dir.rglob("*.partial"))


def test_progress_reports_each_layers_bytes(own_registry: RegistryServer, cache_dir: Path) -> None:
    big = layer([file("big.bin", os.urandom(3 << 20))], compress=False)
    backend = DockerBackend(CONFIG)
    image = backend.resolve(pushed_image_uri(own_registry.host, "tests/progress", [big]))
    reports: list[tuple[str, int, int]] = []

    backend.download(image, cache_dir, progress=lambda *report: reports.append(report))

    layer_reports = [r for r in reports if r[0] == f"download {big.digest}"]
    assert reports[0] == ("resolve", 0, 1)
    assert len(layer_reports) > 1
    assert layer_reports[-1] == (f"download {big.digest}", len(big.blob), len(big.blob))
    assert [r[1] for r in layer_reports] == sorted(r[1] for r in layer_reports)


def test_corrupt_blob_in_the_registry_is_refused(
    own_registry: RegistryServer, cache_dir: Path
) -> None:
    base = layer(busybox_entries())
    backend = DockerBackend(CONFIG)
    image = backend.resolve(pushed_image_uri(own_registry.host, "tests/corrupt", [base]))
    stored = own_registry.blob_data_path(base.digest)
    data = bytearray(stored.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, one bit pattern changed
    stored.write_bytes(bytes(data))

    with pytest.raises(BlobDigestMismatch, match=rf"blob {base.digest} .* is corrupt"):
        backend.download(image, cache_dir)

    assert not BlobStore(cache_dir).has(base.digest, len(base.blob))
    assert not list(cache_dir.rglob("*.partial"))


def test_interrupted_download_resumes_with_a_range_request(
    own_registry: RegistryServer, cache_dir: Path
) -> None:
    big = layer([file("big.bin", os.urandom(48 << 20))], compress=False)
    backend = DockerBackend(CONFIG)
    image = backend.resolve(pushed_image_uri(own_registry.host, "tests/resume", [big]))
    step = f"download {big.digest}"
    cut_at: list[int] = []

    def cut_the_registry_once(name: str, done: int, total: int) -> None:
        if name == step and done >= 8 << 20 and not cut_at:
            cut_at.append(done)
            own_registry.kill()
            threading.Timer(0.5, own_registry.start).start()

    (path,) = backend.download(image, cache_dir, progress=cut_the_registry_once).blobs

    assert hashlib.sha256(path.read_bytes()).hexdigest() == big.digest.split(":")[1]
    # The cut request never completed, so only the resumed one is in the access log.
    (resumed,) = own_registry.blob_gets(big.digest)
    assert resumed.status == 206
    assert resumed.bytes_sent <= len(big.blob) - cut_at[0]


def test_concurrent_pulls_of_one_image_download_each_blob_once(
    own_registry: RegistryServer, cache_dir: Path
) -> None:
    layers = [
        layer(busybox_entries()),
        layer([file("big.bin", os.urandom(16 << 20))], compress=False),
    ]
    uri = pushed_image_uri(own_registry.host, "tests/coalesce", layers)
    image = DockerBackend(CONFIG).resolve(uri)
    start = threading.Barrier(2)
    results: list[list[Path]] = []

    def pull() -> None:
        backend = DockerBackend(CONFIG)
        start.wait()
        results.append(backend.download(image, cache_dir).blobs)

    threads = [threading.Thread(target=pull) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(results) == 2 and results[0] == results[1]
    for item in layers:
        assert len(own_registry.blob_gets(item.digest)) == 1


PULL_IN_A_PROCESS = """
import sys
from pathlib import Path
from fuzzball_core.drivers import ResolvedImage
from fuzzball_plugins.images.docker_backend import DockerBackend

uri, digest, cache = sys.argv[1:4]
def progress(step, done, total):
    if step == "resolve" and done == 1:
        print("manifest-read", flush=True)
image = ResolvedImage(uri=uri, digest=digest, size=0, platform="linux/amd64")
DockerBackend({"platform": "linux/amd64"}).download(image, Path(cache), progress=progress)
print("done", flush=True)
"""


def test_pulls_in_separate_processes_download_each_blob_once(
    own_registry: RegistryServer, cache_dir: Path
) -> None:
    big = layer([file("big.bin", os.urandom(4 << 20))], compress=False)
    image = DockerBackend(CONFIG).resolve(
        pushed_image_uri(own_registry.host, "tests/processes", [big])
    )
    store = BlobStore(cache_dir)
    command = [sys.executable, "-c", PULL_IN_A_PROCESS, image.uri, image.digest, str(cache_dir)]

    # Hold the blob's lock until both processes are past the manifest and waiting on it.
    with store.lock(big.digest):
        pulls = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(2)]
        for pull in pulls:
            assert pull.stdout is not None
            assert pull.stdout.readline().strip() == "manifest-read"
    outputs = [pull.communicate(timeout=60)[0] for pull in pulls]

    assert [pull.returncode for pull in pulls] == [0, 0]
    assert all(output.strip() == "done" for output in outputs)
    assert len(own_registry.blob_gets(big.digest)) == 1
