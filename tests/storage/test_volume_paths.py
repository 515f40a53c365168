"""No path escapes a volume on a node: volume names and ingress destinations are resolved
inside the volume's directory, ``..`` and symbolic links included (a job may have left a link
in a persistent volume pointing anywhere on the host)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.flaky_http import BODY, FlakyServer

from fuzzball_core.errors import InvalidArgument
from fuzzball_core.substrate.ingress import destination_in, fetch_ingress
from fuzzball_core.substrate.volumes import WorkflowVolumes

WORKFLOW = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"


@pytest.fixture
def server() -> Iterator[FlakyServer]:
    running = FlakyServer()
    yield running
    running.server.shutdown()


@pytest.fixture
def volumes(tmp_path: Path) -> WorkflowVolumes:
    return WorkflowVolumes(tmp_path / "work")


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    place = tmp_path / "host-etc"
    place.mkdir()
    (place / "passwd").write_bytes(b"root:x:0:0\n")
    return place


def _fetch(volumes: WorkflowVolumes, url: str, destination: str, **extra: str) -> None:
    fetch_ingress(
        volumes, WORKFLOW, {"data": [{"source": url, "destination": destination, **extra}]}
    )


@pytest.mark.parametrize("name", ["..", "../other", "a/b", ".", ""])
def test_a_volume_name_that_is_not_one_directory_is_refused(volumes, name) -> None:
    with pytest.raises(InvalidArgument, match="not a valid directory name"):
        volumes.volume_dir(WORKFLOW, name)


def test_a_destination_climbing_with_dot_dot_stays_inside_the_volume(server, volumes) -> None:
    _fetch(volumes, server.url, "../../../../escaped.txt")

    data = volumes.volume_dir(WORKFLOW, "data")
    assert (data / "escaped.txt").read_bytes() == BODY
    assert [p for p in volumes.work_dir.rglob("escaped.txt")] == [data / "escaped.txt"]


def test_a_directory_link_pointing_out_of_the_volume_is_followed_inside_it(
    server, volumes, outside
) -> None:
    data = volumes.volume_dir(WORKFLOW, "data")
    (data / "link").symlink_to(outside)

    _fetch(volumes, server.url, "link/passwd")

    assert (outside / "passwd").read_bytes() == b"root:x:0:0\n"
    landed = destination_in(data, "link/passwd")
    assert landed.is_relative_to(data) and landed.read_bytes() == BODY


def test_a_destination_that_is_a_link_out_of_the_volume_is_replaced_not_written_through(
    server, volumes, outside
) -> None:
    data = volumes.volume_dir(WORKFLOW, "data")
    (data / "in.txt").symlink_to(outside / "passwd")

    _fetch(volumes, server.url, "in.txt")

    assert (outside / "passwd").read_bytes() == b"root:x:0:0\n"
    assert not (data / "in.txt").is_symlink()
    assert (data / "in.txt").read_bytes() == BODY
