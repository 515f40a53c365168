"""``POST /v3/admin/provisioner/instances`` for the ``aws`` driver through Orchestrate's REST
gateway: a request the driver refuses is a 400 naming the field, and nothing is created.
moto's server stands in for EC2 (no EC2 is reachable from the tests; it records each action
the driver sends)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.cluster import InProcessOrchestrate, free_port
from support.moto_ec2 import MotoEc2

#: moto's server and an Orchestrate: more than 6 s for the file on the 2-core CI machine
pytestmark = pytest.mark.slow


class Served:
    """Orchestrate with one ``aws`` definition over moto, and an admin."""

    def __init__(self, directory: Path, moto: MotoEc2) -> None:
        rest = f"127.0.0.1:{free_port()}"
        self.orchestrate = InProcessOrchestrate(
            {
                "data-dir": str(directory / "data"),
                "database": {"url": f"sqlite:///{directory / 'orchestrate.db'}"},
                "orchestrate": {
                    "grpc-listen": f"127.0.0.1:{free_port()}",
                    "rest-listen": rest,
                    "node-token": "routes-node-token",
                },
                "tls": {"plaintext": True},
                "provisioner": {
                    "definitions": [
                        {
                            "id": "cpu",
                            "driver": "aws",
                            "cores": 4,
                            "memory": "8GiB",
                            "max-nodes": 3,
                            "config": moto.driver_config(
                                **{"instance-type": "m5.xlarge", "image": "ami-12345678"}
                            ),
                        }
                    ]
                },
            }
        )
        self.url = f"http://{rest}/v3"
        service = self.orchestrate.service
        self.admin = self.orchestrate.call(lambda: service.create_account("ops", admin=True))[1]

    def call(self, method: str, path: str, body: Any = None) -> httpx.Response:
        return httpx.request(
            method,
            self.url + path,
            headers={"Authorization": f"Bearer {self.admin}"},
            json=body,
            timeout=60,
        )


@pytest.fixture
def moto() -> Iterator[MotoEc2]:
    server = MotoEc2()
    yield server
    server.close()


@pytest.fixture
def served(tmp_path: Path, moto: MotoEc2) -> Iterator[Served]:
    running = Served(tmp_path, moto)
    yield running
    running.orchestrate.close()


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"backendDirectives": {"market": "bogus"}}, "backendDirectives.market"),
        ({"annotations": {"k": "x" * 300}}, "annotations: 'k'"),
    ],
)
def test_a_request_the_driver_refuses_is_a_400_naming_the_field_and_creates_nothing(
    served, moto, fields, named
):
    reply = served.call("POST", "/admin/provisioner/instances", {"definitionId": "cpu", **fields})
    assert reply.status_code == 400, reply.text
    assert named in reply.json()["message"]
    assert served.call("GET", "/admin/provisioner/instances").json()["instances"] == []
    assert moto.calls("RunInstances") == []
