"""A volume transfer is tried again per its ``policy.retry.attempts`` (``retries`` in the
assignment) and, out of tries, fails the run naming the transfer."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.flaky_http import BODY, FlakyServer

from fuzzball_core.errors import Unavailable
from fuzzball_core.substrate.ingress import fetch_ingress
from fuzzball_core.substrate.volumes import WorkflowVolumes

WORKFLOW = "3e2d1c0b-9a8f-4e7d-8c6b-5a4f3e2d1c0b"


@pytest.fixture
def volumes(tmp_path: Path) -> WorkflowVolumes:
    return WorkflowVolumes(tmp_path / "work")


def _fetch(volumes: WorkflowVolumes, url: str, retries: int) -> None:
    transfer = {"source": url, "destination": "in.txt", "retries": retries}
    fetch_ingress(volumes, WORKFLOW, {"data": [transfer]})


def test_a_transfer_is_tried_again_up_to_its_retries(volumes) -> None:
    flaky = FlakyServer(failures=2)
    try:
        _fetch(volumes, flaky.url, retries=2)
    finally:
        flaky.stop()

    assert flaky.requests == 3
    assert (volumes.volume_dir(WORKFLOW, "data") / "in.txt").read_bytes() == BODY


def test_a_transfer_out_of_retries_fails_naming_it(volumes) -> None:
    flaky = FlakyServer(failures=5)
    try:
        with pytest.raises(Unavailable, match=r"volumes\.data\.ingress\[0\].*HTTP 503"):
            _fetch(volumes, flaky.url, retries=1)
    finally:
        flaky.stop()

    assert flaky.requests == 2
