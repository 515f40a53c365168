"""Volume ingress on a node, from a real HTTP server on loopback."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from fuzzball_core.errors import Unavailable
from fuzzball_core.substrate.ingress import fetch_ingress
from fuzzball_core.substrate.volumes import WorkflowVolumes

WORKFLOW = "0b7f3c1e-5d2a-4f6b-8e9d-2c1a0f3b4d5e"
FILES = {"/inputs/in.lj.txt": b"units lj\n" * 1000, "/big.bin": bytes(range(256)) * 20000}


class FileServer:
    """Serves a copy of FILES; 404 for anything else; counts requests per path."""

    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        self.files = dict(FILES)
        served = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                served.hits[path] += 1
                body = served.files.get(path)
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Length", str(len(body or b"")))
                self.end_headers()
                self.wfile.write(body or b"")

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_port}{path}"


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
