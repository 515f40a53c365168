"""End to end with the ``gcp`` provisioner against the recorded-shape Compute Engine stand-in.

No Compute Engine emulator exists: support.gcp_standin answers the SDK's calls with the real
API's JSON shapes and starts no machine. The boot hook (support.cloud_boot) reads each new
instance's ``user-data`` metadata back through the stand-in and starts a real Substrate with it
here, as cloud-init would on the instance; once the instance is deleted, the hook kills it.

Needs the ``fuzzball.provisioners`` entry points installed, docker-registry and the node
runtime's prerequisites (root).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cloud_boot import gcp_view, wait_until
from support.cloud_cluster import CloudCluster
from support.cluster import LocalRegistry, have_prerequisites
from support.gcp_standin import GcpStandIn

from fuzzball_core.vocabulary import InstanceState

pytestmark = [pytest.mark.root, pytest.mark.slow]

missing = have_prerequisites()
if missing is not None:
    pytest.skip(missing, allow_module_level=True)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[CloudCluster, GcpStandIn]]:
    registry = LocalRegistry(tmp_path / "registry")
    standin = GcpStandIn(tmp_path)
    config = standin.driver_config(
        standin.credentials_file(),
        cluster="e2e",
        zone="us-central1-a",
        image="projects/fuzzball/global/images/family/fuzzball-node",
        **{"machine-type": "n2-standard-4"},
    )
    try:
        running = CloudCluster(
            tmp_path,
            registry,
            driver="gcp",
            config=config,
            view=gcp_view(standin),
            definition_id="gce",
        )
        yield running, standin
        running.close()
    finally:
        standin.close()
        registry.stop()


def test_a_job_no_node_holds_gets_one_gce_instance_that_runs_it_and_is_deleted_once(cluster):
    running, standin = cluster
    running.run_job()
    (record,) = running.provisioning.records()
    wait_until(lambda: record.state is InstanceState.DELETED, 90, "deleted after idling")
    assert standin.count("POST", "/instances") == 1
    assert standin.count("DELETE") == 1
    assert record.driver_id == f"us-central1-a/{record.name}"
    assert [kind for _, kind, _ in record.history][-2:] == ["instance_deleting", "instance_deleted"]
    wait_until(lambda: running.hook.powered_off == [record.driver_id], 10, "powered off")
