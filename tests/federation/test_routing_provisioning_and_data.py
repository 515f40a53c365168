"""Routing by provisionable capacity, cost and data through the real Federate service.

``cloud`` is a whole in-process Orchestrate with no node but an ``onprem`` provisioner
definition (one GPU per node, $0.50 an hour, ready 2 minutes after it is asked for) and its
storage routes; ``lab`` is a scripted Orchestrate with one free CPU node. Federate reads
cloud's definitions from ``GET /v3/provisioner/definitions`` and where the caller's volumes
live from ``GET /v3/volumes``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.protobuf import json_format
from support.cluster import InProcessOrchestrate, LocalRegistry, cluster_config, free_port
from support.federated_workflows import CPU, GPU
from support.federation_harness import GIB, Federation, start_federation, start_member

from fuzzball_core.service.forwarded_identity import HEADER
from fuzzball_core.vocabulary import EventKind


@dataclass
class CloudMember:
    """The in-process Orchestrate as Federate reaches it (``Reachable``), with its service
    (so that it trusts the Federate's key)."""

    name: str
    rest_url: str
    token: str
    service: Any


def _cloud(directory: Path, registry: LocalRegistry) -> InProcessOrchestrate:
    config = cluster_config(directory / "cloud", registry.url, grpc_port=free_port())
    config["provisioner"] = {
        "definitions": [
            {
                "id": "gpu-box",
                "driver": "onprem",
                "cores": 8,
                "memory": "32GiB",
                "devices": {"nvidia.com/gpu": 1},
                "cost-per-hour-estimate": 0.5,
                "startup-time-estimate": "2m",
                "config": {
                    "state-dir": str(directory / "onprem"),
                    "inventory": [{"host": "box-1", "power-on": "true", "power-off": "true"}],
                },
            }
        ]
    }
    return InProcessOrchestrate(config)


@pytest.fixture(scope="module")
def cloud_and_lab(tmp_path_factory) -> Iterator[tuple[Federation, CloudMember]]:
    directory = tmp_path_factory.mktemp("routing")
    registry = LocalRegistry(directory / "registry")
    cloud = _cloud(directory, registry)
    _, token = cloud.call(lambda: cloud.service.create_account("federate", kind="federate"))
    reachable = CloudMember("cloud", cloud.rest_url, token, cloud.service)
    lab = start_member(directory, "lab", [{"name": "cpu-1", "cores": 16, "memory": 64 * GIB}])
    federation = start_federation(directory, [reachable, lab])
    try:
        yield federation, reachable
    finally:
        federation.close()
        lab.close()
        cloud.close()
        registry.stop()


def _routed(federation: Federation, workflow_id: str) -> tuple[str, dict[str, Any]]:
    event = federation.client().list_events(workflow_id)[0]
    assert event.kind == EventKind.WORKFLOW_ROUTED
    return event.message, json_format.MessageToDict(event.data)


def test_a_members_provisionable_capacity_makes_it_eligible(cloud_and_lab):
    federation, _ = cloud_and_lab
    workflow_id = federation.client().start_workflow(GPU, name="gpu")
    assert federation.service.cluster_of(federation.who, workflow_id) == "cloud"
    message, data = _routed(federation, workflow_id)
    assert "new node(s) of definition gpu-box (+120 s)" in message
    job = data["candidates"][0]["jobs"]["jobs.main"]
    assert (job["capacity"], job["definition"], job["cost"]) == ("provision", "gpu-box", 0.5)
    assert data["rejected"] == {"lab": "no node has nvidia.com/gpu"}


def test_free_capacity_wins_over_provisionable_capacity_that_costs(cloud_and_lab):
    federation, _ = cloud_and_lab
    workflow_id = federation.client().start_workflow(CPU, name="cpu")
    assert federation.service.cluster_of(federation.who, workflow_id) == "lab"
    _, data = _routed(federation, workflow_id)
    costs = {c["cluster"]: c["costEstimate"] for c in data["candidates"]}
    assert costs == {"lab": 0, "cloud": 0.5}


def test_a_workflow_mounting_a_persistent_volume_goes_to_the_member_holding_it(cloud_and_lab):
    federation, cloud = cloud_and_lab
    # the user's own volume there: made with their identity, as Federate forwards it
    created = httpx.post(
        f"{cloud.rest_url}/v3/volumes",
        json={"volume": {"name": "results"}},
        headers={
            "Authorization": f"Bearer {cloud.token}",
            HEADER: federation.service.signer.assertion(federation.who, "cloud"),
        },
        timeout=30,
    )
    assert created.status_code == 200, created.text
    mounting = CPU.replace(
        "    resource:\n", "    mounts:\n      data:\n        location: /data\n    resource:\n"
    )
    mounting += "volumes:\n  data:\n    reference: volume://user/persistent/results\n"
    workflow_id = federation.client().start_workflow(mounting, name="with-data")
    assert federation.service.cluster_of(federation.who, workflow_id) == "cloud"
    message, _ = _routed(federation, workflow_id)
    assert "also eligible: lab" in message
