"""A registry mirror that dies mid-pull: the pull goes on from the next mirror (or the
registry itself), resuming where the dead one stopped, and retries per the backoff while
none answers; when the pull fails after all, the error names the mirror that failed and
every other endpoint tried, not just the registry. Two real loopback registries hold the
same image; one is killed from the pull's own progress callback."""

from __future__ import annotations

import hashlib
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.oci_pusher import Pusher, file, layer
from support.registry_server import RegistryServer, free_port

from fuzzball_core.errors import FuzzballError, Unavailable
from fuzzball_plugins.images.docker_backend import DockerBackend

REPOSITORY = "tests/failover"
#: the registry the images name; nothing listens there, so only the mirrors can serve
ORIGIN = f"127.0.0.1:{free_port()}"
#: bytes of the image's one layer, large enough to be cut in the middle
LAYER_BYTES = 24 << 20


@pytest.fixture
def big_layer():
    return layer([file("big.bin", os.urandom(LAYER_BYTES))], compress=False)


def _registry_with(workdir: Path, big) -> RegistryServer:
    server = RegistryServer(workdir)
    server.start()
    pusher = Pusher(server.url)
    try:
        pusher.push_image(REPOSITORY, "1", [big])
    finally:
        pusher.close()
    return server


@pytest.fixture
def mirrors(tmp_path: Path, big_layer) -> Iterator[tuple[RegistryServer, RegistryServer]]:
    """Two mirrors of ORIGIN holding the same image."""
    first = _registry_with(tmp_path / "first", big_layer)
    second = _registry_with(tmp_path / "second", big_layer)
    try:
        yield first, second
    finally:
        first.kill()
        second.kill()


class CuttingMirror:
    """A mirror that answers every request with a 200 whose body stops a few bytes in, then
    closes the connection: a mirror dying in the middle of a manifest."""

    def __init__(self) -> None:
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        self.requests = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._socket.accept()
            except OSError:
                return  # closed
            with connection:
                request = b""
                while b"\r\n\r\n" not in request:
                    chunk = connection.recv(4096)
                    if not chunk:
                        break
                    request += chunk
                self.requests += 1
                connection.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 4096\r\n"
                    b"Content-Type: application/vnd.oci.image.manifest.v1+json\r\n\r\n"
                    b'{"schemaVersion": 2, "layers": ['
                )

    def close(self) -> None:
        self._socket.close()


@pytest.fixture
def cutting_mirror() -> Iterator[CuttingMirror]:
    mirror = CuttingMirror()
    try:
        yield mirror
    finally:
        mirror.close()


def _backend(*mirror_urls: str, attempts: int = 4) -> DockerBackend:
    return DockerBackend(
        {
            "platform": "linux/amd64",
            "retry": {"attempts": attempts, "initial-delay": 0.05, "max-delay": 0.2},
            "registries": {ORIGIN: {"mirrors": list(mirror_urls), "insecure": True}},
        }
    )


def _kill_midway(server: RegistryServer, digest: str, restart_after: float | None = None):
    """A progress callback that kills ``server`` once a third of the layer has arrived (and
    starts it again ``restart_after`` seconds later, when given)."""
    killed: list[int] = []

    def progress(step: str, done: int, total: int) -> None:
        if step == f"download {digest}" and done >= total // 3 and not killed:
            killed.append(done)
            server.kill()
            if restart_after is not None:
                threading.Timer(restart_after, server.start).start()

    return progress, killed


def test_a_mirror_dying_mid_pull_hands_the_rest_of_the_layer_to_the_next_mirror(
    mirrors, big_layer, cache_dir: Path
):
    first, second = mirrors
    backend = _backend(first.url, second.url)
    image = backend.resolve(f"docker://{ORIGIN}/{REPOSITORY}:1")
    progress, killed = _kill_midway(first, big_layer.digest)

    (path,) = backend.download(image, cache_dir, progress=progress).blobs

    assert hashlib.sha256(path.read_bytes()).hexdigest() == big_layer.digest.split(":")[1]
    (resumed,) = second.blob_gets(big_layer.digest)
    assert resumed.status == 206  # the second mirror sent only what the first had not
    assert resumed.bytes_sent <= LAYER_BYTES - killed[0]


def test_a_pull_whose_only_mirror_dies_midway_is_retried_until_it_returns(
    mirrors, big_layer, cache_dir: Path
):
    first, _ = mirrors
    backend = _backend(first.url, attempts=30)
    image = backend.resolve(f"docker://{ORIGIN}/{REPOSITORY}:1")
    progress, _ = _kill_midway(first, big_layer.digest, restart_after=0.5)

    (path,) = backend.download(image, cache_dir, progress=progress).blobs

    assert hashlib.sha256(path.read_bytes()).hexdigest() == big_layer.digest.split(":")[1]


def test_a_pull_failing_after_its_mirror_died_names_that_mirror_and_the_registry(
    mirrors, big_layer, cache_dir: Path
):
    first, _ = mirrors
    backend = _backend(first.url, attempts=2)
    image = backend.resolve(f"docker://{ORIGIN}/{REPOSITORY}:1")
    progress, _ = _kill_midway(first, big_layer.digest)

    with pytest.raises(Unavailable) as failed:
        backend.download(image, cache_dir, progress=progress)

    message = failed.value.message
    assert f"mirror {first.url}" in message
    assert f"registry {ORIGIN}" in message and f"http://{ORIGIN}" in message


def test_a_mirror_cutting_a_manifest_midway_is_passed_over_for_the_next_mirror(
    mirrors, cutting_mirror
):
    _, second = mirrors
    backend = _backend(cutting_mirror.url, second.url)

    resolved = backend.resolve(f"docker://{ORIGIN}/{REPOSITORY}:1")

    assert resolved.digest.startswith("sha256:")
    assert cutting_mirror.requests >= 1  # it was asked first, and cut its reply
    assert second.access_log()  # the rest came from the second mirror


def test_a_tag_missing_from_the_mirror_names_the_mirror_then_the_unreachable_registry(mirrors):
    first, _ = mirrors
    backend = _backend(first.url, attempts=1)

    with pytest.raises(FuzzballError) as failed:
        backend.resolve(f"docker://{ORIGIN}/{REPOSITORY}:missing")

    message = failed.value.message
    assert f"not found in mirror {first.url} of {ORIGIN}" in message
    assert f"registry {ORIGIN} is unreachable" in message
    assert f"not found in registry {ORIGIN}" not in message
