"""Fixtures: real ``docker-registry`` instances on loopback, filled with images built here."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.oci_pusher import (
    Pusher,
    busybox_entries,
    directory,
    file,
    layer,
    opaque,
    whiteout,
)
from support.private_registry import start_private_registry
from support.registry_images import PRIVATE_PASSWORD, PRIVATE_USER, SharedImages
from support.registry_server import REGISTRY_BINARY, RegistryServer, TokenAuth
from support.token_server import ISSUER, SERVICE, TokenServer

if not Path(REGISTRY_BINARY).exists() or not Path("/bin/busybox").exists():
    pytest.skip(
        "tests/images need Debian's docker-registry and busybox-static packages",
        allow_module_level=True,
    )


def start_registry(workdir: Path, **options: object) -> RegistryServer:
    """Start a registry in ``workdir``; the caller kills it."""
    server = RegistryServer(workdir, **options)  # type: ignore[arg-type]
    server.start()
    return server


def push_test_images(pusher: Pusher) -> SharedImages:
    """Push every image the tests pull (busybox-based; built from files right here)."""
    base = layer(busybox_entries())
    single = pusher.push_image("tests/single", "1", [base])
    middle = layer(
        [
            directory("home"),
            directory("home/user", uid=1000, gid=1000),
            file("home/user/notes.txt", b"first version\n", uid=1000, gid=1000),
            file("etc/obsolete.conf", b"gone in layer 3\n"),
            directory("opt"),
            directory("opt/old"),
            file("opt/old/a.txt", b"hidden by the opaque marker\n"),
        ]
    )
    top = layer(
        [
            whiteout("etc/obsolete.conf"),
            opaque("opt/old"),
            file("opt/old/b.txt", b"only file left in opt/old\n"),
            file("home/user/data.bin", b"\x00\x01" * 512, mode=0o600, uid=1000, gid=1000),
        ]
    )
    # Pushed chunked, so both upload flows of the Distribution API are in use.
    layered = pusher.push_image("tests/layered", "1", [base, middle, top], chunk_size=64 * 1024)
    multi_amd64 = pusher.push_image(
        "tests/multi", "amd64-only", [base, layer([file("arch", b"amd64\n")])]
    )
    multi_arm64 = pusher.push_image(
        "tests/multi", "arm64-only", [layer([file("arch", b"arm64\n")])], architecture="arm64"
    )
    multi_index = pusher.push_index("tests/multi", "1", [multi_arm64, multi_amd64])
    arm_only = pusher.push_image(
        "tests/armonly", "1", [layer([file("arch", b"arm64\n")])], architecture="arm64"
    )
    hub_alpine = pusher.push_image(
        "library/alpine", "latest", [base, layer([file("etc/alpine-release", b"3.99.0\n")])]
    )
    docker_amd64 = pusher.push_image(
        "tests/dockerlist",
        "amd64-only",
        [base, layer([file("format", b"docker\n")])],
        docker_format=True,
    )
    docker_arm64 = pusher.push_image(
        "tests/dockerlist",
        "arm64-only",
        [layer([file("format", b"docker\n")])],
        architecture="arm64",
        docker_format=True,
    )
    docker_list = pusher.push_index(
        "tests/dockerlist", "1", [docker_arm64, docker_amd64], docker_format=True
    )
    return SharedImages(
        single,
        layered,
        multi_index,
        multi_amd64,
        multi_arm64,
        arm_only,
        hub_alpine,
        docker_list,
        docker_amd64,
    )


@pytest.fixture(scope="session")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryServer]:
    """A shared registry without authentication; tests must not modify its storage."""
    server = start_registry(tmp_path_factory.mktemp("registry"))
    yield server
    server.kill()


@pytest.fixture(scope="session")
def test_images(registry: RegistryServer) -> SharedImages:
    """The shared registry's images."""
    pusher = Pusher(registry.url)
    try:
        return push_test_images(pusher)
    finally:
        pusher.close()


@pytest.fixture
def own_registry(tmp_path: Path) -> Iterator[RegistryServer]:
    """A registry for one test only (to corrupt, kill and restart)."""
    server = start_registry(tmp_path / "registry")
    yield server
    server.kill()


@pytest.fixture(scope="session")
def private_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryServer]:
    """A second registry that requires basic authentication (htpasswd with a bcrypt entry)."""
    server = start_private_registry(tmp_path_factory.mktemp("private-registry"))
    yield server
    server.kill()


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    """An empty node image cache."""
    path = tmp_path / "cache"
    path.mkdir()
    return path


@pytest.fixture(scope="session")
def token_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TokenServer]:
    """The token service :func:`token_registry` sends its clients to."""
    tokens = TokenServer(tmp_path_factory.mktemp("token-service"), PRIVATE_USER, PRIVATE_PASSWORD)
    tokens.start()
    yield tokens
    tokens.stop()


@pytest.fixture(scope="session")
def token_registry(
    tmp_path_factory: pytest.TempPathFactory, token_service: TokenServer
) -> Iterator[RegistryServer]:
    """A registry behind bearer-token authentication, with its token service."""
    workdir = tmp_path_factory.mktemp("token-registry")
    tokens = token_service
    auth = TokenAuth(tokens.realm, SERVICE, ISSUER, tokens.cert_path)
    server = start_registry(workdir, token_auth=auth)
    pusher = Pusher(server.url, bearer_token=tokens.issue("repository:private/app:pull,push"))
    try:
        pusher.push_image("private/app", "1", [layer(busybox_entries())])
    finally:
        pusher.close()
    yield server
    server.kill()
