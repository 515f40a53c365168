"""A storage class's capacity holds in a real workflow: a job of a persistent ``local``
volume whose class has a 16 MiB capacity can write 8 MiB into it, and a job writing 32 MiB
fails with the kernel's "No space left on device" (the volume is its own loop-mounted ext4
filesystem on the node), the node's disk untouched past the capacity."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cluster import Cluster, LocalRegistry
from support.storage import unmount_under

from fuzzball_core.orchestrate import storage_catalog as catalog
from fuzzball_core.orchestrate.workflow_volumes import installed_driver
from fuzzball_core.service.views import FAILED, FINISHED

WRITE = """version: v4
volumes:
  results: {{reference: volume://user/capped/results}}
jobs:
  write:
    image: {{uri: docker://alpine:latest}}
    command: [/bin/sh, -c, "dd if=/dev/zero of=/results/out bs=1M count={mib} && df -k /results"]
    mounts: {{/results: results}}
"""


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    registry = LocalRegistry(tmp_path / "registry")
    built = Cluster(tmp_path / "cluster", registry.url, agents=1)
    definition = {
        "name": "capped",
        "driver": "local",
        "properties": {"persistent": True},
        "capacity": {"size": "16", "unit": "MIB"},
    }

    def add_class(tx) -> None:
        catalog.ensure_defaults(tx.session, tx.now)
        catalog.create_class(tx.session, definition, installed_driver, tx.now)

    engine = built.orchestrate.orchestrate.engine
    built.orchestrate.call(lambda: engine.change(add_class))
    try:
        yield built
    finally:
        built.close()
        registry.stop()
        unmount_under(tmp_path)


def test_a_job_writes_within_its_volumes_capacity(cluster) -> None:
    workflow_id = cluster.orchestrate.start_workflow(WRITE.format(mib=8))
    view = cluster.orchestrate.wait_for(workflow_id, timeout=120)
    failures = [e.message for e in cluster.orchestrate.events(workflow_id) if "fail" in e.kind]
    assert view.status == FINISHED, failures
    # df inside the job sees the volume's own filesystem, about 16 MiB
    sizes = [
        int(line.split()[1])
        for line in cluster.orchestrate.logs(workflow_id, "jobs.write").splitlines()
        if line.endswith("/results")
    ]
    assert sizes and 12 * 1024 <= sizes[0] <= 16 * 1024


def test_a_job_writing_past_its_volumes_capacity_fails_with_no_space_left(cluster) -> None:
    workflow_id = cluster.orchestrate.start_workflow(WRITE.format(mib=32))
    view = cluster.orchestrate.wait_for(workflow_id, timeout=120)
    assert view.status == FAILED
    assert "No space left on device" in cluster.orchestrate.logs(workflow_id, "jobs.write")
