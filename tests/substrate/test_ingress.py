"""Volume ingress on a node, from a real HTTP server on loopback."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from fuzzball_core.drivers import VolumeLocation
from fuzzball_core.errors import Unavailable
from fuzzball_core.substrate.ingress import fetch_ingress
from fuzzball_core.substrate.volumes import WorkflowVolumes

WORKFLOW = "0b7f3c1e-5d2a-4f6b-8e9d-2c1a0f3b4d5e"
OTHER_WORKFLOW = "6d1e9a40-3b7c-4e21-9f8a-5c2b7d0e1f3a"
FILES = {"/inputs/in.lj.txt": b"units lj\n" * 1000, "/big.bin": bytes(range(256)) * 20000}


class FileServer:
    """Serves a copy of FILES; 404 for anything else; counts requests per path."""

    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        self.files = dict(FILES)
        #: path -> (set once half its body is sent, set to send the rest)
        self.paused: dict[str, tuple[threading.Event, threading.Event]] = {}
        served = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                served.hits[path] += 1
                body = served.files.get(path)
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Length", str(len(body or b"")))
                self.end_headers()
                body = body or b""
                if path in served.paused:
                    half_sent, resume = served.paused[path]
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    half_sent.set()
                    resume.wait(10)
                    body = body[len(body) // 2 :]
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_port}{path}"

    def pause_halfway(self, path: str) -> tuple[threading.Event, threading.Event]:
        """Serve half of ``path``, then wait for the second event before the rest."""
        self.paused[path] = (threading.Event(), threading.Event())
        return self.paused[path]


@pytest.fixture
def server() -> Iterator[FileServer]:
    running = FileServer()
    yield running
    running.server.shutdown()


@pytest.fixture
def volumes(tmp_path: Path) -> WorkflowVolumes:
    return WorkflowVolumes(tmp_path)


def _ingress(server: FileServer, *pairs: tuple[str, str]) -> dict[str, list[dict[str, str]]]:
    return {"data": [{"source": server.url(s), "destination": d} for s, d in pairs]}


def test_sources_land_at_their_destinations_in_the_volume(server, volumes) -> None:
    ingress = _ingress(server, ("/inputs/in.lj.txt", "in.lj.txt"), ("/big.bin", "sub/dir/b"))

    fetch_ingress(volumes, WORKFLOW, ingress)

    data = volumes.volume_dir(WORKFLOW, "data")
    assert (data / "in.lj.txt").read_bytes() == FILES["/inputs/in.lj.txt"]
    assert (data / "sub/dir/b").read_bytes() == FILES["/big.bin"]
    assert sorted(p.name for p in data.rglob("*") if p.is_file()) == ["b", "in.lj.txt"]


def test_a_volume_is_filled_once_per_node_even_by_jobs_starting_together(server, volumes) -> None:
    ingress = _ingress(server, ("/big.bin", "b"))

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda _: fetch_ingress(volumes, WORKFLOW, ingress), range(4)))
    fetch_ingress(volumes, WORKFLOW, ingress)

    assert server.hits["/big.bin"] == 1


def test_a_missing_source_names_the_transfer_without_credentials(server, volumes) -> None:
    source = server.url("/nope.txt").replace("http://", "http://user:hunter2@") + "?sig=s3cr3t"
    ingress = {"data": [{"source": source, "destination": "x"}]}

    with pytest.raises(Unavailable) as failed:
        fetch_ingress(volumes, WORKFLOW, ingress)

    assert failed.value.message == (
        f"volumes.data.ingress[0]: could not fetch {server.url('/nope.txt')}: HTTP 404"
    )
    assert list(volumes.volume_dir(WORKFLOW, "data").iterdir()) == []


def test_a_failed_ingress_is_tried_again_by_the_next_job(server, volumes) -> None:
    ingress = _ingress(server, ("/inputs/in.lj.txt", "in"), ("/missing", "m"))
    with pytest.raises(Unavailable):
        fetch_ingress(volumes, WORKFLOW, ingress)
    server.files["/missing"] = b"now here"
    fetch_ingress(volumes, WORKFLOW, ingress)
    assert (volumes.volume_dir(WORKFLOW, "data") / "m").read_bytes() == b"now here"


def test_a_destination_cannot_climb_out_of_the_volume(server, volumes, tmp_path) -> None:
    fetch_ingress(volumes, WORKFLOW, _ingress(server, ("/inputs/in.lj.txt", "../../../escaped")))

    assert list(tmp_path.rglob("escaped")) == [volumes.volume_dir(WORKFLOW, "data") / "escaped"]


def test_an_unreachable_server_is_reported(volumes) -> None:
    ingress = {"data": [{"source": "http://127.0.0.1:9/x", "destination": "x"}]}
    with pytest.raises(Unavailable) as failed:
        fetch_ingress(volumes, WORKFLOW, ingress)
    assert failed.value.message.startswith(
        "volumes.data.ingress[0]: could not fetch http://127.0.0.1:9/x: "
    )


def test_two_workflows_filling_one_persistent_volume_each_land_a_whole_file(
    server, volumes, tmp_path
) -> None:
    server.files["/first"] = b"1" * (3 << 20)
    server.files["/second"] = b"2" * (1 << 20)
    half_sent, resume = server.pause_halfway("/first")
    shared = VolumeLocation(
        driver="hostpath",
        storage_class="kept",
        organization_id="org-acme",
        volume_id="3f0c2f6e-1111-4222-8333-444455556666",
        parameters={"root": str(tmp_path / "shared")},
    )
    directory = volumes.locate(WORKFLOW, "data", shared)

    def fill(workflow_id: str, source: str) -> None:
        ingress = {"data": [{"source": server.url(source), "destination": "in.bin"}]}
        fetch_ingress(volumes, workflow_id, ingress, locations={"data": shared})

    with ThreadPoolExecutor(1) as pool:
        slow = pool.submit(fill, WORKFLOW, "/first")
        assert half_sent.wait(10)
        _wait_for(lambda: any(p.stat().st_size for p in directory.glob(".in.bin*partial")))
        fill(OTHER_WORKFLOW, "/second")
        assert (directory / "in.bin").read_bytes() == server.files["/second"]
        resume.set()
        slow.result(timeout=10)

    assert (directory / "in.bin").read_bytes() == server.files["/first"]
    assert [p.name for p in directory.iterdir()] == ["in.bin"]


def test_a_failed_fetch_removes_only_its_own_temporary_file(server, volumes) -> None:
    data = volumes.volume_dir(WORKFLOW, "data")
    others = data / ".in.bin.partial"  # another fetch's, under way
    others.write_bytes(b"half")
    with pytest.raises(Unavailable):
        fetch_ingress(volumes, WORKFLOW, _ingress(server, ("/missing", "in.bin")))
    assert [p.name for p in data.iterdir()] == [others.name]


def _wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)
