"""Volume transfers report their progress and, once done, their bytes and time; Orchestrate
turns the reports into ``volume_transfer`` events naming the transfer, with URLs shown
without credentials."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.flaky_http import BODY, FlakyServer

from fuzzball_core.orchestrate.transfer_events import transfer_event
from fuzzball_core.substrate.ingress import fetch_ingress
from fuzzball_core.substrate.volumes import WorkflowVolumes
from fuzzball_core.vocabulary import EventKind

WORKFLOW = "1f2e3d4c-5b6a-4978-8695-a4b3c2d1e0f9"


class Recorder:
    """A TransferReporter keeping every report."""

    def __init__(self) -> None:
        self.moved: list[tuple[str, str, int, int | None]] = []
        self.ends: list[tuple[str, str, int, float]] = []

    def moving(self, transfer: str, url: str, done: int, total: int | None) -> None:
        self.moved.append((transfer, url, done, total))

    def ended(self, transfer: str, url: str, done: int, seconds: float) -> None:
        self.ends.append((transfer, url, done, seconds))


@pytest.fixture
def server() -> Iterator[FlakyServer]:
    running = FlakyServer()
    yield running
    running.stop()


def test_a_transfer_reports_its_bytes_and_then_its_size_and_time(server, tmp_path: Path) -> None:
    recorder = Recorder()
    source = server.url.replace("http://", "http://user:pw@") + "?token=abc"
    ingress = {"data": [{"source": source, "destination": "in.txt"}]}

    fetch_ingress(
        WorkflowVolumes(tmp_path),
        WORKFLOW,
        ingress,
        progress=recorder,
    )

    shown = server.url
    assert recorder.moved[-1] == ("volumes.data.ingress[0]", shown, len(BODY), len(BODY))
    ((transfer, url, done, seconds),) = recorder.ends
    assert (transfer, url, done) == ("volumes.data.ingress[0]", shown, len(BODY))
    assert seconds >= 0


def test_a_finished_transfers_report_becomes_an_event_with_its_size_and_time() -> None:
    report = {
        "transfer": "volumes.data.ingress[0]",
        "url": "s3://inputs/in.bin",
        "done": 3 << 30,
        "total": 3 << 30,
        "seconds": 12.34,
    }

    kind, message, details = transfer_event("jobs.run", json.dumps(report).encode())  # type: ignore[misc]

    assert kind is EventKind.VOLUME_TRANSFER
    assert (
        message == "jobs.run: volumes.data.ingress[0]: fetched s3://inputs/in.bin, 3.0 GiB in 12.3s"
    )
    assert details["seconds"] == 12.34


def test_a_moving_transfers_report_becomes_an_event_with_how_far_it_got() -> None:
    report = {
        "transfer": "volumes.data.ingress[1]",
        "url": "https://h/f",
        "done": 1 << 20,
        "total": 4 << 20,
    }

    _, message, _ = transfer_event("jobs.run", json.dumps(report).encode())  # type: ignore[misc]

    assert message == "jobs.run: volumes.data.ingress[1]: https://h/f 25% (1.0 MiB of 4.0 MiB)"


def test_an_image_steps_report_is_not_a_transfers() -> None:
    step = {"step": "download layer", "done": 1, "total": 2}

    assert transfer_event("images.x", json.dumps(step).encode()) is None
