"""Pinning a workflow's images at submission talks to registries; the API keeps answering
other requests meanwhile (the round trips run off Orchestrate's event loop)."""

from __future__ import annotations

import socket
import threading

import httpx
from support.live_api import HELLO

from fuzzball_core.config import parse_config
from fuzzball_core.orchestrate.image_stages import configure_images
from fuzzball_core.plugins import get_registry


def test_other_requests_are_served_while_a_submission_waits_for_a_registry(stack, tmp_path):
    silent = socket.socket()  # a registry that accepts connections and never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    mirror = f"http://127.0.0.1:{silent.getsockname()[1]}"
    config = parse_config(
        {
            "data-dir": str(tmp_path / "data"),
            "images": {"registries": {"docker.io": {"mirrors": [mirror]}}},
        }
    )
    service = stack.service.service
    stack.loop.run(
        _on_loop(lambda: configure_images(service.engine, service, config, get_registry()))
    )
    headers = {"Authorization": f"Bearer {stack.token}"}
    submitted: dict[str, object] = {}

    def submit() -> None:
        reply = httpx.post(
            f"{stack.servers.rest_url}/v3/workflows",
            headers=headers,
            json={"rawSpecification": HELLO},
            timeout=120,
        )
        submitted["status"] = reply.status_code

    submitter = threading.Thread(target=submit)
    submitter.start()
    try:
        connection, _ = silent.accept()  # the submission is now waiting on the registry
        version = httpx.get(f"{stack.servers.rest_url}/v3/version", headers=headers, timeout=30)
        assert version.status_code == 200
        assert submitter.is_alive()  # answered while the submission was still pending
        connection.close()
    finally:
        silent.close()  # the registry goes away: the submission fails instead of hanging
        submitter.join(timeout=120)
    assert submitted["status"] in (400, 503), submitted


async def _on_loop(call):
    return call()
