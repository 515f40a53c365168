"""End to end with the ``aws`` provisioner, moto's server standing in for EC2.

moto is the best stand-in for EC2 here: boto3 speaks EC2's real protocol to it over HTTP, and
it keeps each instance's user data, tags and state. It starts no machine, so the boot hook
(support.cloud_boot) reads each new instance's user data back from moto
(DescribeInstanceAttribute userData) and starts a real Substrate with it on this machine, as
cloud-init would on the instance; when moto says the instance is terminated, the hook kills it.

Needs the ``fuzzball.provisioners`` entry points installed, docker-registry and the node
runtime's prerequisites (root).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.cloud_boot import ec2_view, wait_until
from support.cloud_cluster import CloudCluster
from support.cluster import NODE_TOKEN, LocalRegistry, have_prerequisites
from support.moto_ec2 import SECRET_ACCESS_KEY, MotoEc2

from fuzzball_core.certificates import CertificateAuthority, local_hosts
from fuzzball_core.drivers import NodeBootstrap
from fuzzball_core.vocabulary import InstanceState

pytestmark = [pytest.mark.root, pytest.mark.slow]

missing = have_prerequisites()
if missing is not None:
    pytest.skip(missing, allow_module_level=True)


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[LocalRegistry]:
    running = LocalRegistry(tmp_path / "registry")
    yield running
    running.stop()


@pytest.fixture
def moto() -> Iterator[MotoEc2]:
    server = MotoEc2()
    yield server
    server.close()


def aws_cluster(
    directory: Path, registry: LocalRegistry, moto: MotoEc2, tls: dict[str, Any] | None = None
) -> CloudCluster:
    """Scaling on one spot m5.xlarge definition, ``ec2``."""
    config = moto.driver_config(
        cluster="e2e", image="ami-0fuzzball0node00", market="spot", **{"instance-type": "m5.xlarge"}
    )
    return CloudCluster(
        directory,
        registry,
        driver="aws",
        config=config,
        view=ec2_view(moto),
        definition_id="ec2",
        tls=tls,
    )


@pytest.fixture
def cluster(tmp_path: Path, registry: LocalRegistry, moto: MotoEc2) -> Iterator[CloudCluster]:
    running = aws_cluster(tmp_path, registry, moto)
    yield running
    running.close()


def test_a_job_no_node_holds_gets_one_ec2_instance_that_runs_it_idles_and_terminates_once(
    cluster, moto
):
    cluster.run_job()

    (record,) = cluster.provisioning.records()
    wait_until(lambda: record.state is InstanceState.DELETED, 90, "deleted after idling")
    assert len(moto.calls("RunInstances")) == 1
    assert moto.calls("TerminateInstances") == [(record.driver_id,)]
    assert moto.states() == {record.driver_id: "terminated"}
    kinds = [kind for _, kind, _ in record.history]
    assert kinds == [
        "instance_requested",
        "instance_registered",
        "instance_idle",
        "instance_deleting",
        "instance_deleted",
    ]
    (node,) = cluster.orchestrate.nodes()
    assert node.name == record.name
    assert node.annotations["pool"] == "ec2"
    # the machine goes off when EC2 terminates it
    wait_until(lambda: cluster.hook.powered_off == [record.driver_id], 10, "powered off")


def test_the_instances_user_data_holds_only_its_one_time_token_and_no_cluster_secret(cluster, moto):
    cluster.run_job()
    (record,) = cluster.provisioning.records()
    user_data = moto.user_data(record.driver_id)
    token = NodeBootstrap.parse(user_data).registration_token
    assert token != NODE_TOKEN
    for secret in (NODE_TOKEN, SECRET_ACCESS_KEY):
        assert secret not in user_data
    for secret in (NODE_TOKEN, SECRET_ACCESS_KEY, token):
        assert secret not in cluster.hook.logs()
    for event in cluster.orchestrate.call(
        lambda: cluster.orchestrate.service.list_node_events(cluster.orchestrate.admin, record.name)
    ):
        assert token not in str(event) and SECRET_ACCESS_KEY not in str(event)


def test_a_node_booted_from_user_data_trusts_the_clusters_ca(tmp_path, registry, moto):
    ca = CertificateAuthority.create(tmp_path / "ca")
    server = ca.issue_server_certificate(tmp_path / "s.crt", tmp_path / "s.key", local_hosts())
    tls = {
        "ca-file": str(ca.cert_file),
        "cert-file": str(server.cert_file),
        "key-file": str(server.key_file),
    }
    cluster = aws_cluster(tmp_path, registry, moto, tls=tls)
    try:
        cluster.run_job()
        (record,) = cluster.provisioning.records()
        booted = NodeBootstrap.parse(moto.user_data(record.driver_id))
        assert booted.ca_pem == ca.cert_file.read_text()
        assert "PRIVATE KEY" not in moto.user_data(record.driver_id)
    finally:
        cluster.close()
