"""Which pins share a registry connection: anonymous ones of a backend do, ones with
credentials do not."""

from __future__ import annotations

from typing import Any

import httpcore
import pytest
from support.registry_images import PRIVATE_PASSWORD, PRIVATE_USER, SharedImages
from support.registry_server import RegistryServer

from fuzzball_plugins.images.docker_backend import DockerBackend

AMD64 = {"platform": "linux/amd64"}
GOOD = {"username": PRIVATE_USER, "password": PRIVATE_PASSWORD}


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The host of every TCP connection httpx opens, in order."""
    opened: list[str] = []
    connect = httpcore.SyncBackend.connect_tcp

    def counted(self: httpcore.SyncBackend, host: str, *args: Any, **kwargs: Any) -> Any:
        opened.append(host)
        return connect(self, host, *args, **kwargs)

    monkeypatch.setattr(httpcore.SyncBackend, "connect_tcp", counted)
    return opened


def test_anonymous_pins_of_one_backend_share_one_connection(
    registry: RegistryServer, test_images: SharedImages, connections: list[str]
) -> None:
    backend = DockerBackend(AMD64)

    pins = [backend.resolve(f"docker://{registry.host}/tests/single:1") for _ in range(3)]

    assert {pin.digest for pin in pins} == {test_images.single.digest}
    assert len(connections) == 1


def test_pins_with_credentials_open_a_connection_each(
    private_registry: RegistryServer, connections: list[str]
) -> None:
    backend = DockerBackend(AMD64)
    uri = f"docker://{private_registry.host}/private/app:1"

    first = backend.resolve(uri, credentials=GOOD)
    opened_by_one = len(connections)
    second = backend.resolve(uri, credentials=GOOD)

    assert first.digest == second.digest
    assert opened_by_one >= 1
    assert len(connections) == 2 * opened_by_one  # none of the first pin's reused
