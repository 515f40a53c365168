"""End to end: Federate in front of two real clusters, each an Orchestrate with a Substrate.

``lab`` has one agent of 1 core annotated ``site=lab``; ``cloud`` one agent of 2 cores. The
upstream hello-world goes to the roomier ``cloud``; the same job requiring ``site=lab`` goes
to ``lab``. Both run in real containers, and their status and output are read through
Federate.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from support.cluster import HELLO_WORLD, Cluster, LocalRegistry, have_prerequisites
from support.federation_harness import Federation, start_federation

from fuzzball_core.api.v1 import client_pb2 as pb

missing = have_prerequisites()
if missing is not None:
    pytest.skip(missing, allow_module_level=True)


@dataclass
class RealMember:
    """A running cluster as Federate reaches it."""

    name: str
    rest_url: str
    token: str
    #: the member's service, which start_federation makes trust the Federate's identities
    service: Any


@pytest.fixture(scope="module")
def federation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Federation]:
    directory = tmp_path_factory.mktemp("federate-e2e")
    registry = LocalRegistry(directory / "registry")
    clusters: list[Cluster] = []
    try:
        for name, cores, annotations in (("lab", 1, {"site": "lab"}), ("cloud", 2, {})):
            (directory / name).mkdir()
            clusters.append(
                Cluster(
                    directory / name,
                    registry.url,
                    agents=1,
                    cores=cores,
                    memory="2GiB",
                    substrate={"annotations": annotations},
                )
            )
        members = []
        for name, running in zip(("lab", "cloud"), clusters, strict=True):
            orchestrate = running.orchestrate
            _, token = orchestrate.call(
                lambda o=orchestrate: o.service.create_account("federate", kind="federate")
            )
            members.append(RealMember(name, orchestrate.rest_url, token, orchestrate.service))
        federated = start_federation(directory, members)
        try:
            yield federated
        finally:
            federated.close()
    finally:
        for running in clusters:
            running.close()
        registry.stop()


def _run(federation: Federation, specification: str) -> tuple[str, pb.GetWorkflowStatusResponse]:
    client = federation.client()
    workflow_id = client.start_workflow(specification, name="hello-world.fz")
    deadline = time.monotonic() + 120
    while (status := client.workflow_status(workflow_id)).workflow_status not in (
        pb.STAGE_STATUS_FINISHED,
        pb.STAGE_STATUS_FAILED,
        pb.STAGE_STATUS_CANCELED,
    ):
        assert time.monotonic() < deadline, status
        time.sleep(0.2)
    return workflow_id, status


def test_hello_world_runs_on_the_roomier_cluster_and_its_output_comes_back(federation):
    workflow_id, status = _run(federation, HELLO_WORLD.read_text())
    assert status.workflow_status == pb.STAGE_STATUS_FINISHED, status
    assert federation.service.cluster_of(federation.who, workflow_id) == "cloud"
    output = b"".join(c.output for c in federation.client().stream_logs(workflow_id))
    assert output.startswith(b"Hello, world! Hostname")


def test_job_requiring_an_annotation_runs_on_the_cluster_that_has_it(federation):
    pinned = HELLO_WORLD.read_text().replace(
        "    resource:\n", "    resource:\n      annotations:\n        site: lab\n"
    )
    workflow_id, status = _run(federation, pinned)
    assert status.workflow_status == pb.STAGE_STATUS_FINISHED, status
    assert federation.service.cluster_of(federation.who, workflow_id) == "lab"
