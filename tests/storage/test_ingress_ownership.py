"""Files a node fetches into a volume belong to whom the job runs as (its image's user), as
do the directories made for them; what the volume already held is left as it was."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.flaky_http import FlakyServer

from fuzzball_core.substrate.ingress import fetch_ingress
from fuzzball_core.substrate.volumes import WorkflowVolumes

WORKFLOW = "7c6b5a4f-3e2d-4c1b-9a8f-7e6d5c4b3a29"
JOB_USER = (4321, 8765)


@pytest.fixture
def server() -> Iterator[FlakyServer]:
    running = FlakyServer()
    yield running
    running.stop()


def test_fetched_files_and_their_new_directories_belong_to_the_jobs_user(
    server, tmp_path: Path
) -> None:
    volumes = WorkflowVolumes(tmp_path / "work")
    data = volumes.volume_dir(WORKFLOW, "data")
    (data / "kept").mkdir()
    transfer = {"source": server.url, "destination": "kept/new/in.txt"}

    fetch_ingress(volumes, WORKFLOW, {"data": [transfer]}, owner=JOB_USER)

    for made in (data / "kept/new", data / "kept/new/in.txt"):
        assert (made.stat().st_uid, made.stat().st_gid) == JOB_USER
    assert (data / "kept").stat().st_uid == os.getuid()
    assert data.stat().st_uid == os.getuid()
