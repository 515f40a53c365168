"""A pulled image written back through the storing image backend (the object cache's),
retried on that backend's schedule and reported as progress documents."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from fuzzball_core.plugins import get_registry
from fuzzball_core.substrate.image_write_back import WriteBack, write_back

TARGET = {"owner": "u1", "scope": "user", "name": "tools", "definition-hash": "h1"}
STORED_DIGEST = "sha256:" + "ab" * 32


class ObjectCache:
    """Orchestrate's node-objects upload route, refusing the first ``failures`` uploads."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.uploads: list[bytes] = []
        cache = self

        class Handler(BaseHTTPRequestHandler):
            def do_PUT(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                cache.uploads.append(body)
                if len(cache.uploads) <= cache.failures:
                    self.send_response(503)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                answer = json.dumps({"digest": STORED_DIGEST}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass  # the test's output stays readable

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def image(tmp_path: Path) -> Path:
    path = tmp_path / "image.erofs"
    path.write_bytes(b"erofs" * 1000)
    return path


@pytest.fixture
def flaky_cache() -> Iterator[ObjectCache]:
    cache = ObjectCache(failures=2)
    yield cache
    cache.close()


@pytest.fixture
def refusing_cache() -> Iterator[ObjectCache]:
    cache = ObjectCache(failures=1000)
    yield cache
    cache.close()


def _store(config: dict[str, Any]) -> Any:
    """The storing backend as a node loads it: through the image-backend plugins."""
    return get_registry().driver("fuzzball.image_backends", "fuzzball", config)


def _statuses(reports: list[dict[str, Any]]) -> list[str]:
    return [r["status"] for r in reports if "status" in r]


def test_failed_uploads_are_retried_on_the_stores_schedule_then_stored(
    image: Path, flaky_cache: ObjectCache
) -> None:
    store = _store({"object-cache-url": flaky_cache.url, "object-cache-token": "t"})
    reports: list[dict[str, Any]] = []
    slept: list[float] = []

    stored = write_back(image, WriteBack(store, TARGET), reports.append, sleep=slept.append)

    assert stored
    assert slept == [0.25, 0.5]  # the images' default schedule: 0.25 s doubling
    assert _statuses(reports) == ["retrying", "retrying", "stored"]
    assert reports[-1]["digest"] == STORED_DIGEST
    assert flaky_cache.uploads[-1] == image.read_bytes()


def test_the_write_back_is_abandoned_when_the_attempts_run_out(
    image: Path, refusing_cache: ObjectCache
) -> None:
    store = _store({"object-cache-url": refusing_cache.url, "retry": {"attempts": 3}})
    reports: list[dict[str, Any]] = []

    stored = write_back(image, WriteBack(store, TARGET), reports.append, sleep=lambda _: None)

    assert not stored
    assert len(refusing_cache.uploads) == 3
    assert _statuses(reports) == ["retrying", "retrying", "abandoned"]
    assert reports[-1]["reason"].startswith("gave up after 3 attempts: ")


def test_a_stopped_run_abandons_its_write_back_instead_of_retrying(
    image: Path, refusing_cache: ObjectCache
) -> None:
    store = _store({"object-cache-url": refusing_cache.url})
    reports: list[dict[str, Any]] = []

    write_back(image, WriteBack(store, TARGET), reports.append, stopped=lambda: True)

    assert len(refusing_cache.uploads) == 1
    assert _statuses(reports) == ["abandoned"]
    assert reports[-1]["reason"].startswith("the run was stopped: ")


def test_a_node_without_an_object_cache_address_abandons_at_once(image: Path) -> None:
    reports: list[dict[str, Any]] = []

    stored = write_back(image, WriteBack(_store({}), TARGET), reports.append)

    assert not stored
    assert reports == [
        {
            "step": "write-back",
            "done": 0,
            "total": image.stat().st_size,
            "status": "abandoned",
            "reason": "images.object-cache-url is not set on this node",
        }
    ]
