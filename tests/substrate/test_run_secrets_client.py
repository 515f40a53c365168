"""The agent's ``RunSecrets`` call names its node (Orchestrate answers about the runs placed
on the node asking only), as its latest Register answered it."""

from __future__ import annotations

import asyncio

from fuzzball_core.api.v1 import node_pb2
from fuzzball_core.substrate.run_secrets import RunSecretsClient


class RecordingStub:
    """A node API stub that keeps each ``RunSecrets`` request and answers a token."""

    def __init__(self) -> None:
        self.asked: list[node_pb2.RunSecretsRequest] = []

    async def RunSecrets(self, request, *, metadata, timeout) -> node_pb2.RunSecretsResponse:
        self.asked.append(request)
        return node_pb2.RunSecretsResponse(workflow_token="tok")


def test_the_call_names_the_node_as_registered_when_asked() -> None:
    stub = RecordingStub()
    registered = {"node_id": "node-before-restart"}
    client = RunSecretsClient(stub, (("authorization", "Bearer t"),), lambda: registered["node_id"])
    registered["node_id"] = "node-7"

    asyncio.run(client.fetch(12))

    assert [(r.run_id, r.node_id) for r in stub.asked] == [(12, "node-7")]
