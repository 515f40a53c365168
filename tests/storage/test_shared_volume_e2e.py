"""Two jobs of one workflow on two nodes of a test cluster (two Substrate agents, Orchestrate
in this process) share a per-workflow volume of a shared class: a ``hostpath`` class whose
root every node sees (here one directory of this machine, as an NFS mount would be)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cluster import Cluster, LocalRegistry

from fuzzball_core.orchestrate import storage_catalog as catalog
from fuzzball_core.orchestrate.workflow_volumes import installed_driver
from fuzzball_core.service.views import FINISHED

WORKFLOW = """version: v4
volumes:
  data: {reference: volume://user/scratch}
jobs:
  write:
    image: {uri: docker://alpine:latest}
    command: [/bin/sh, -c, "hostname > /data/writer; echo shared-8d1c >> /data/writer"]
    resource: {annotations: {e2e/node: "1"}}
    mounts: {/data: data}
  read:
    image: {uri: docker://alpine:latest}
    command: [/bin/sh, -c, "echo reader $(hostname); cat /data/writer"]
    resource: {annotations: {e2e/node: "2"}}
    mounts: {/data: data}
    depends-on: [{name: write}]
"""


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    registry = LocalRegistry(tmp_path / "registry")
    built = Cluster(tmp_path / "cluster", registry.url, agents=2, annotations_per_node=True)
    try:
        yield built
    finally:
        built.close()
        registry.stop()


def test_two_jobs_on_two_nodes_share_a_volume_of_a_shared_class(cluster, tmp_path) -> None:
    shared = tmp_path / "shared"
    definition = {"name": "scratch", "driver": "hostpath", "parameters": {"root": str(shared)}}

    def add_class(tx) -> None:
        catalog.ensure_defaults(tx.session, tx.now)
        catalog.create_class(tx.session, definition, installed_driver, tx.now)

    engine = cluster.orchestrate.orchestrate.engine
    cluster.orchestrate.call(lambda: engine.change(add_class))
    workflow_id = cluster.orchestrate.start_workflow(WORKFLOW)
    view = cluster.orchestrate.wait_for(workflow_id, timeout=120)
    failures = [e.message for e in cluster.orchestrate.events(workflow_id) if "fail" in e.kind]
    assert view.status == FINISHED, failures
    read = cluster.orchestrate.logs(workflow_id, "jobs.read")
    written = cluster.orchestrate.logs(workflow_id, "jobs.write")
    assert "shared-8d1c" in read
    assert written == ""  # the writer printed nothing: the reader read its file
    (writer_file,) = shared.glob("*/workflows/*/data/writer")
    assert "shared-8d1c" in writer_file.read_text()
