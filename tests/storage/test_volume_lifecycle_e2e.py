"""A persistent volume's data on the node: its size is reported after a job that mounted it
ends, deleting it removes the data from the node (or keeps it, for a class that retains on
delete), and a volume a running job mounts cannot be deleted.

A test cluster (one Substrate agent, Orchestrate in this process); the volumes are of a
persistent ``hostpath`` class whose root is a directory of this machine, as a shared mount
would be, so the test sees what the node did to the data."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.cluster import Cluster, LocalRegistry, SubstrateProcess

from fuzzball_core.errors import FailedPrecondition
from fuzzball_core.orchestrate import storage_catalog as catalog
from fuzzball_core.orchestrate import volume_removal
from fuzzball_core.orchestrate.volumes import VolumeOwner
from fuzzball_core.orchestrate.workflow_volumes import installed_driver
from fuzzball_core.service.views import FINISHED, STARTED
from fuzzball_core.store.models import Volume, Workflow

#: what the writing job puts in the volume
WRITTEN = 300_000

WRITE = f"""version: v4
volumes:
  data: {{reference: volume://user/CLASS/results}}
jobs:
  write:
    image: {{uri: docker://alpine:latest}}
    command: [/bin/sh, -c, "head -c {WRITTEN} /dev/urandom > /data/blob"]
    mounts: {{/data: data}}
"""

HOLD = """version: v4
volumes:
  data: {reference: volume://user/CLASS/results}
jobs:
  hold:
    image: {uri: docker://alpine:latest}
    command: [/bin/sh, -c, "touch /data/started; while [ ! -e /data/stop ]; do sleep 0.1; done"]
    mounts: {/data: data}
"""


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    registry = LocalRegistry(tmp_path / "registry")
    built = Cluster(tmp_path / "cluster", registry.url, agents=1)
    try:
        yield built
    finally:
        built.close()
        registry.stop()


def _change(cluster: Cluster, work: Callable[[Any], Any]) -> Any:
    engine = cluster.orchestrate.orchestrate.engine
    return cluster.orchestrate.call(lambda: engine.change(work))


def _add_class(cluster: Cluster, root: Path, *, retain: bool) -> str:
    name = "kept" if retain else "shared"
    definition = {
        "name": name,
        "driver": "hostpath",
        "parameters": {"root": str(root)},
        "properties": {"persistent": True, "retainOnDelete": retain},
    }

    def add(tx: Any) -> None:
        catalog.ensure_defaults(tx.session, tx.now)
        catalog.create_class(tx.session, definition, installed_driver, tx.now)

    _change(cluster, add)
    return name


def _run(cluster: Cluster, specification: str, storage_class: str) -> str:
    workflow_id = cluster.orchestrate.start_workflow(specification.replace("CLASS", storage_class))
    view = cluster.orchestrate.wait_for(workflow_id, timeout=120)
    failures = [e.message for e in cluster.orchestrate.events(workflow_id) if "fail" in e.kind]
    assert view.status == FINISHED, failures
    return workflow_id


def _volume(cluster: Cluster) -> dict[str, Any]:
    def read(tx: Any) -> dict[str, Any]:
        (row,) = tx.session.query(Volume).all()
        return {
            "id": row.id,
            "size": row.size_bytes,
            "status": row.status,
            "access": row.access_time,
        }

    return _change(cluster, read)


def _delete(cluster: Cluster, workflow_id: str, volume_id: str) -> dict[str, object]:
    engine = cluster.orchestrate.orchestrate.engine

    def delete(tx: Any) -> dict[str, object]:
        owner = VolumeOwner.of_workflow(tx.session, tx.session.get(Workflow, workflow_id))
        return volume_removal.delete(engine.context, tx, owner, volume_id)

    return _change(cluster, delete)


def _wait_for_status(cluster: Cluster, status: str) -> None:
    deadline = time.monotonic() + 60
    while _volume(cluster)["status"] != status:
        assert time.monotonic() < deadline, f"the volume never became {status}"
        time.sleep(0.2)


def test_a_volumes_size_is_reported_after_a_job_wrote_to_it(cluster, tmp_path) -> None:
    storage_class = _add_class(cluster, tmp_path / "shared", retain=False)
    _run(cluster, WRITE, storage_class)
    volume = _volume(cluster)
    # du-style: the blocks the bytes take, plus the directory's own
    assert WRITTEN <= volume["size"] < WRITTEN + 64 * 1024


def test_deleting_a_volume_removes_its_data_from_the_node(cluster, tmp_path) -> None:
    root = tmp_path / "shared"
    storage_class = _add_class(cluster, root, retain=False)
    workflow_id = _run(cluster, WRITE, storage_class)
    (blob,) = root.glob("*/*/blob")
    volume = _volume(cluster)

    answer = _delete(cluster, workflow_id, volume["id"])

    assert answer["retained"] is False
    _wait_for_status(cluster, volume_removal.DELETED)
    assert not blob.parent.exists()


def test_a_class_that_retains_on_delete_keeps_the_data(cluster, tmp_path) -> None:
    root = tmp_path / "kept"
    storage_class = _add_class(cluster, root, retain=True)
    workflow_id = _run(cluster, WRITE, storage_class)
    (blob,) = root.glob("*/*/blob")

    answer = _delete(cluster, workflow_id, _volume(cluster)["id"])

    assert answer["retained"] is True
    assert blob.stat().st_size == WRITTEN


def test_a_volume_a_running_workflow_declares_cannot_be_deleted(cluster, tmp_path) -> None:
    root = tmp_path / "shared"
    storage_class = _add_class(cluster, root, retain=False)
    workflow_id = cluster.orchestrate.start_workflow(
        HOLD.replace("CLASS", storage_class), name="holder"
    )
    cluster.orchestrate.wait_for(workflow_id, lambda w: w.status == STARTED, timeout=120)
    deadline = time.monotonic() + 60
    while not list(root.glob("*/*/started")):
        assert time.monotonic() < deadline, "the job never started"
        time.sleep(0.1)

    with pytest.raises(FailedPrecondition, match="not yet ended: 'holder'"):
        _delete(cluster, workflow_id, _volume(cluster)["id"])

    (started,) = root.glob("*/*/started")
    (started.parent / "stop").touch()
    assert cluster.orchestrate.wait_for(workflow_id, timeout=120).status == FINISHED
    assert started.exists()  # the refused delete removed nothing


def test_a_node_local_volume_is_removed_when_its_offline_node_returns(cluster) -> None:
    workflow_id = _run(cluster, WRITE, catalog.PERSISTENT_CLASS)  # the local driver's class
    (blob,) = (cluster.directory / "node-1" / "volumes").glob("*/*/blob")
    agent = cluster.agent("node-1")
    agent.stop()

    answer = _delete(cluster, workflow_id, _volume(cluster)["id"])

    assert answer == {"retained": False, "status": volume_removal.DELETING}
    assert blob.exists()  # its node is away: nothing removed it yet
    cluster.agents[0] = SubstrateProcess(agent.config_path, agent.log_path)
    _wait_for_status(cluster, volume_removal.DELETED)
    assert not blob.parent.exists()
