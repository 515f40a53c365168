"""Provisioner definitions that come only from the central configuration: an Orchestrate
whose file defines none still runs the provisioning loop (idle), so a ``local`` definition
posted to ``/admin/centralconfig`` scales up for a job only it can hold, and the job runs
on the provisioned node (a real Substrate process started from the instance's user data).

Needs the ``fuzzball.provisioners`` entry points of setup.py installed, docker-registry and
the node runtime's prerequisites.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from support.cluster import (
    InProcessOrchestrate,
    LocalRegistry,
    cluster_config,
    free_port,
    have_prerequisites,
)

from fuzzball_core.orchestrate.provisioning import Provisioning
from fuzzball_core.vocabulary import InstanceState

pytestmark = [pytest.mark.root, pytest.mark.slow]

missing = have_prerequisites()
if missing is not None:
    pytest.skip(missing, allow_module_level=True)

JOB = """\
version: v1
jobs:
  hello:
    image: {uri: docker://alpine:latest}
    command: [/bin/sh, -c, "echo from the central definition"]
    resource: {cpu: {cores: 3}, memory: {size: 512MiB}}
"""


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[LocalRegistry]:
    running = LocalRegistry(tmp_path / "registry")
    yield running
    running.stop()


@pytest.fixture
def cluster(tmp_path: Path, registry: LocalRegistry) -> dict[str, Any]:
    """The cluster's configuration: no node, no provisioner definition in the file."""
    config: dict[str, Any] = cluster_config(tmp_path, registry.url, grpc_port=free_port())
    assert not config.get("provisioner", {}).get("definitions")
    return config


@pytest.fixture
def orchestrate(cluster: dict[str, Any]) -> Iterator[InProcessOrchestrate]:
    """Orchestrate over ``cluster``; whatever instances the test made are deleted after."""
    running = InProcessOrchestrate(cluster)
    yield running
    provisioning = loop_of(running)
    for record in provisioning.records([InstanceState.CREATING, InstanceState.CREATED]):
        running.call(lambda r=record: provisioning.delete(r.id))
    running.close()


def loop_of(orchestrate: InProcessOrchestrate) -> Provisioning:
    provisioning = orchestrate.orchestrate.engine.context.provisioning
    assert provisioning is not None
    return provisioning


def local_definition(tmp_path: Path, config: dict[str, Any]) -> dict[str, Any]:
    """A ``local`` definition of 4 cores whose nodes read the cluster's image and TLS
    settings."""
    base = tmp_path / "node-base.yaml"
    base.write_text(yaml.safe_dump({"images": config["images"], "tls": config["tls"]}))
    return {
        "id": "central",
        "driver": "local",
        "cores": 4,
        "memory": "2GiB",
        "max-nodes": 1,
        "idle-timeout": 60,
        "config": {"state-dir": str(tmp_path / "instances"), "base-config": str(base)},
    }


def post_central_config(orchestrate: InProcessOrchestrate, document: dict[str, Any]) -> None:
    token = orchestrate.call(lambda: orchestrate.service.create_account("ops", admin=True))[1]
    encoded = base64.b64encode(yaml.safe_dump(document).encode()).decode()
    answer = httpx.post(
        f"{orchestrate.rest_url}/v3/admin/centralconfig",
        json={"config": encoded},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text


def test_a_central_definition_scales_up_for_a_job_only_it_can_hold(orchestrate, cluster, tmp_path):
    definition = local_definition(tmp_path, cluster)
    post_central_config(orchestrate, {"provisioner": {"definitions": [definition]}})
    workflow = orchestrate.start_workflow(JOB)
    view = orchestrate.wait_for(workflow, timeout=120)
    assert view.status == "FINISHED", view
    assert "from the central definition" in orchestrate.logs(workflow)
    (record,) = loop_of(orchestrate).records()
    assert record.definition_id == "central"
    (node,) = orchestrate.nodes()
    assert node.name == record.name
