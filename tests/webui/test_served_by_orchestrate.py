"""Orchestrate itself (``server.build`` and ``serve``, as ``fuzzball-orchestrate serve``
runs it) serves the Web UI at ``/`` of its REST listener beside ``/v3`` and the health
paths, each still answering as before."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.cluster import InProcessOrchestrate, cluster_config, free_port

pytestmark = pytest.mark.slow

PASSWORD = "Sturdy-Lantern-42x"


@pytest.fixture(scope="module")
def orchestrate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessOrchestrate]:
    directory = Path(tmp_path_factory.mktemp("served"))
    # no image is pulled here: the mirror is never asked
    served = InProcessOrchestrate(
        cluster_config(directory, "http://127.0.0.1:9", grpc_port=free_port())
    )
    served.call(
        lambda: served.service.identity.create_organization(
            "acme", owner_email="owner@acme.test", owner_password=PASSWORD
        )
    )
    deadline = time.monotonic() + 30
    while True:  # serve() listens in the background
        try:
            httpx.get(f"{served.rest_url}/healthz", timeout=2)
            break
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    try:
        yield served
    finally:
        served.close()


def test_orchestrate_serves_the_pages_to_a_signed_in_owner(
    orchestrate: InProcessOrchestrate,
) -> None:
    client = httpx.Client(base_url=orchestrate.rest_url)
    guard = re.search(r'name="csrf" value="([^"]+)"', client.get("/signin").text)
    assert guard is not None
    form = {"csrf": guard[1], "email": "owner@acme.test", "password": PASSWORD}
    assert client.post("/signin", data=form).status_code == 303
    for page in ("/", "/secrets", "/endpoints", "/volumes", "/static/htmx.min.js"):
        answer = client.get(page)
        assert answer.status_code == 200, f"{page}: {answer.text}"
        assert "script-src 'self'" in answer.headers["Content-Security-Policy"]


def test_the_api_and_health_paths_answer_as_before(orchestrate: InProcessOrchestrate) -> None:
    url = orchestrate.rest_url
    assert httpx.get(f"{url}/healthz").status_code == 200
    assert httpx.get(f"{url}/v3/version").status_code == 200
    unauthenticated = httpx.get(f"{url}/v3/nodes")
    assert unauthenticated.status_code == 401
    assert unauthenticated.json()["message"].startswith("missing credentials")
    assert "Content-Security-Policy" not in unauthenticated.headers  # the UI's alone
    assert httpx.get(f"{url}/no-such-page").status_code == 404
