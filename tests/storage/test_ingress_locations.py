"""Ingress fills a volume where its storage driver keeps it (the assignment's location), so
the job that binds the driver's directory sees the files; each workflow using a persistent
volume gets its own ingress."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.flaky_http import BODY, FlakyServer
from support.storage import plugin_driver

from fuzzball_core.drivers import VolumeLocation
from fuzzball_core.substrate.ingress import fetch_ingress
from fuzzball_core.substrate.volumes import WorkflowVolumes

FIRST = "0a1b2c3d-4e5f-4a6b-8c7d-8e9f0a1b2c3d"
SECOND = "1b2c3d4e-5f6a-4b7c-9d8e-9f0a1b2c3d4e"
KEPT = VolumeLocation(
    driver="local",
    storage_class="kept",
    organization_id="org-acme",
    volume_id="3f0c2f6e-1111-4222-8333-444455556666",
    name="results",
)


@pytest.fixture
def server() -> Iterator[FlakyServer]:
    running = FlakyServer()
    yield running
    running.stop()


@pytest.fixture
def volumes(tmp_path: Path) -> WorkflowVolumes:
    return WorkflowVolumes(tmp_path / "work", drivers=plugin_driver)


def _ingress(server: FlakyServer, destination: str) -> dict[str, list[dict[str, str]]]:
    return {"data": [{"source": server.url, "destination": destination}]}


def test_a_located_volume_is_filled_in_its_drivers_directory(server, volumes) -> None:
    fetch_ingress(volumes, FIRST, _ingress(server, "in.txt"), locations={"data": KEPT})

    assert (volumes.locate(FIRST, "data", KEPT) / "in.txt").read_bytes() == BODY
    assert not (volumes.workflow_dir(FIRST) / "volumes").exists()


def test_each_workflow_using_a_persistent_volume_gets_its_own_ingress(server, volumes) -> None:
    fetch_ingress(volumes, FIRST, _ingress(server, "first.txt"), locations={"data": KEPT})
    fetch_ingress(volumes, SECOND, _ingress(server, "second.txt"), locations={"data": KEPT})
    fetch_ingress(volumes, SECOND, _ingress(server, "again.txt"), locations={"data": KEPT})

    kept = volumes.locate(SECOND, "data", KEPT)
    assert sorted(p.name for p in kept.iterdir()) == ["first.txt", "second.txt"]
    assert server.requests == 2
