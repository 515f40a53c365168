"""``images.cache-write-back``: a pulled image is uploaded to the object cache as well, with
its progress, retries and abandonment reported as the pull stage's events; an upload that
fails or stalls never fails the stage."""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Callable, Iterator

import pytest
from support.cluster import Cluster
from support.loopback_http import QuietHandler, serving

from fuzzball_core.store.object_cache import CacheAddress

pytestmark = [pytest.mark.root, pytest.mark.slow]

PULL_STAGE = "images.docker://alpine:latest"
HELLO = (
    "version: v1\njobs:\n  hi:\n    image: {uri: docker://alpine:latest}\n"
    "    command: [/bin/cat, /etc/alpine-release]\n"
)


def _events(cluster: Cluster, workflow_id: str, stage: str = PULL_STAGE) -> list:
    return [e for e in cluster.orchestrate.events(workflow_id) if e.stage_name == stage]


def _stage_status(cluster: Cluster, workflow_id: str, stage: str = PULL_STAGE) -> str:
    view = cluster.orchestrate.workflow(workflow_id)
    return next(s.status for s in view.stages if s.name == stage)


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            held.append(connection)

    threading.Thread(target=accept, daemon=True).start()
    yield listener.getsockname()[1]
    listener.close()
    for connection in held:
        connection.close()


class _Unavailable(QuietHandler):
    def do_PUT(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.answer(503, b'{"code": 14, "message": "the object cache is unavailable"}')


@pytest.fixture
def unavailable_port() -> Iterator[int]:
    """A loopback HTTP server answering every upload with 503."""
    with serving(_Unavailable) as port:
        yield port


def test_a_pulled_image_is_written_back_and_a_later_fuzzball_uri_runs_it(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(agents=1, images={"cache-write-back": True})
    orchestrate = cluster.orchestrate
    pulled = orchestrate.start_workflow(HELLO, name="write-back")
    view = orchestrate.wait_for(pulled, timeout=120)

    assert view.status == "FINISHED", view
    kinds = [e.kind for e in _events(cluster, pulled)]
    assert "image_written_back" in kinds, kinds
    uploads = [
        e
        for e in _events(cluster, pulled)
        if e.kind == "image_progress" and e.data.get("step") == "write-back"
    ]
    assert uploads and uploads[-1].data["done"] == uploads[-1].data["total"]
    cached = orchestrate.call(
        lambda: orchestrate.service.object_cache.lookup(
            # the group of the account that submitted it: its own, as it has no organization
            CacheAddress.checked(
                "",
                "group",
                "docker/alpine:latest",
                group=orchestrate.service.object_cache.group_of(orchestrate.admin.account_id),
            )
        )
    )
    assert cached is not None and cached.size > 0

    reuse = orchestrate.start_workflow(
        "version: v1\njobs:\n  again:\n    image: {uri: fuzzball://group/docker/alpine:latest}\n"
        "    command: [/bin/cat, /etc/alpine-release]\n",
        name="from-the-cache",
    )
    assert orchestrate.wait_for(reuse, timeout=120).status == "FINISHED"
    assert orchestrate.logs(reuse, "jobs.again") == "3.99.0\n"


def test_an_image_the_object_cache_already_holds_is_not_written_back_again(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(agents=1, images={"cache-write-back": True})
    orchestrate = cluster.orchestrate
    first = orchestrate.start_workflow(HELLO, name="first")
    assert orchestrate.wait_for(first, timeout=120).status == "FINISHED"

    second = orchestrate.start_workflow(HELLO, name="second")

    assert orchestrate.wait_for(second, timeout=120).status == "FINISHED"
    assert "image_written_back" in [e.kind for e in _events(cluster, first)]
    kinds = [e.kind for e in _events(cluster, second)]
    assert "image_written_back" not in kinds and "image_progress" in kinds


def test_a_stalled_write_back_is_abandoned_and_the_pull_still_finishes(
    make_cluster: Callable[..., Cluster], silent_port: int
) -> None:
    cluster = make_cluster(
        agents=1,
        images={
            "cache-write-back": True,
            "cache-write-back-stall": 1,
            "object-cache-url": f"http://127.0.0.1:{silent_port}",
        },
    )
    orchestrate = cluster.orchestrate
    workflow_id = orchestrate.start_workflow(HELLO, name="stalled-write-back")
    view = orchestrate.wait_for(workflow_id, timeout=120)

    assert view.status == "FINISHED", view
    assert _stage_status(cluster, workflow_id) == "FINISHED"
    abandoned = [e for e in _events(cluster, workflow_id) if e.kind == "image_write_back_abandoned"]
    assert len(abandoned) == 1
    assert re.search(r"stalled: no progress for \d+s \(limit 1s\)", abandoned[0].message)
    assert "the pull itself succeeded" in abandoned[0].message
    assert orchestrate.logs(workflow_id, "jobs.hi") == "3.99.0\n"


def test_a_refused_write_back_is_retried_then_abandoned_without_failing_the_stage(
    make_cluster: Callable[..., Cluster], unavailable_port: int
) -> None:
    cluster = make_cluster(
        agents=1,
        images={
            "cache-write-back": True,
            "object-cache-url": f"http://127.0.0.1:{unavailable_port}",
        },
    )
    orchestrate = cluster.orchestrate
    workflow_id = orchestrate.start_workflow(HELLO, name="refused-write-back")
    view = orchestrate.wait_for(workflow_id, timeout=120)

    assert view.status == "FINISHED", view
    assert _stage_status(cluster, workflow_id) == "FINISHED"
    events = _events(cluster, workflow_id)
    retries = [e for e in events if e.kind == "image_write_back_retrying"]
    assert [e.data["attempt"] for e in retries] == [1, 2, 3, 4, 5]
    assert [e.data["delay"] for e in retries] == [0.25, 0.5, 1.0, 2.0, 4.0]
    assert "503" in retries[0].message
    abandoned = [e for e in events if e.kind == "image_write_back_abandoned"]
    assert len(abandoned) == 1 and "gave up after 6 attempts" in abandoned[0].message
