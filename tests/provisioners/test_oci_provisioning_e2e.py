"""End to end with the ``oci`` provisioner against the recorded-shape OCI stand-in.

No OCI emulator exists: support.oci_standin checks the SDK's request signatures, answers its
calls with the real API's JSON shapes and starts no machine. The boot hook
(support.cloud_boot) reads each new instance's ``user_data`` metadata back through the
stand-in and starts a real Substrate with it here, as cloud-init would on the instance; once
the instance is terminated, the hook kills it.

Needs the ``fuzzball.provisioners`` entry points installed, docker-registry and the node
runtime's prerequisites (root).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cloud_boot import oci_view, wait_until
from support.cloud_cluster import CloudCluster
from support.cluster import LocalRegistry, have_prerequisites
from support.oci_standin import OciStandIn

from fuzzball_core.vocabulary import InstanceState

pytestmark = [pytest.mark.root, pytest.mark.slow]

missing = have_prerequisites()
if missing is not None:
    pytest.skip(missing, allow_module_level=True)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[CloudCluster, OciStandIn]]:
    registry = LocalRegistry(tmp_path / "registry")
    standin = OciStandIn(tmp_path)
    config = standin.driver_config(
        standin.key_file(),
        cluster="e2e",
        shape="VM.Standard.E4.Flex",
        ocpus=2,
        image="ocid1.image.oc1.iad.aaaanodeimage",
        **{
            "memory-gb": 16,
            "availability-domain": "Uocm:US-ASHBURN-AD-1",
            "subnet-id": "ocid1.subnet.oc1.iad.aaaasubnet",
        },
    )
    try:
        running = CloudCluster(
            tmp_path,
            registry,
            driver="oci",
            config=config,
            view=oci_view(standin),
            definition_id="oci",
        )
        yield running, standin
        running.close()
    finally:
        standin.close()
        registry.stop()


def test_a_job_no_node_holds_gets_one_oci_instance_that_runs_it_and_is_terminated_once(cluster):
    running, standin = cluster
    running.run_job()
    (record,) = running.provisioning.records()
    wait_until(lambda: record.state is InstanceState.DELETED, 90, "deleted after idling")
    assert standin.count("POST") == 1
    assert standin.count("DELETE") == 1
    assert standin.states()[record.driver_id] in ("TERMINATING", "TERMINATED")
    assert [kind for _, kind, _ in record.history][-2:] == ["instance_deleting", "instance_deleted"]
    wait_until(lambda: running.hook.powered_off == [record.driver_id], 10, "powered off")
