"""The ``gcp`` provisioner against a recorded-shape stand-in for Compute Engine.

No Compute Engine emulator exists, so these tests run the real SDK (google-cloud-compute, REST
transport, service-account credentials) against support.gcp_standin: an HTTP server on
loopback answering the calls the driver makes with the real API's JSON shapes. It is a
stand-in, not Compute Engine: it starts no machines and checks no quota.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.gcp_standin import GcpStandIn

from fuzzball_core.drivers import InstanceSpec, Launch, NodeBootstrap
from fuzzball_core.errors import InvalidArgument, PermissionDenied
from fuzzball_core.vocabulary import InstanceState
from fuzzball_provisioners.gcp import GcpProvisioner, instance_name

#: more than 6 s for the file on the 2-core CI machine (tests/conftest.py's rule)
pytestmark = pytest.mark.slow

TOKEN = "one-time-registration-token-for-the-gcp-test-0123456789"
ZONE = "us-central1-a"


@pytest.fixture
def standin(tmp_path: Path) -> Iterator[GcpStandIn]:
    running = GcpStandIn(tmp_path)
    yield running
    running.close()


def definition(standin: GcpStandIn, **config: Any) -> InstanceSpec:
    settings = standin.driver_config(
        standin.credentials_file(),
        cluster="test",
        zone=ZONE,
        image="projects/debian-cloud/global/images/family/debian-12",
        **{"machine-type": "n2-standard-4"},
    )
    return InstanceSpec(
        definition="cpu", cores=4, memory=16 << 30, driver_config={**settings, **config}
    )


def launch(name: str = "cpu-0001") -> Launch:
    bootstrap = NodeBootstrap(
        orchestrate_address="10.0.0.1:50051", node_name=name, registration_token=TOKEN
    )
    return Launch(name, bootstrap.render())


def created_body(standin: GcpStandIn, name: str) -> dict[str, Any]:
    return standin.instances[(ZONE, name)].body


def test_each_launch_is_one_insert_carrying_its_user_data_as_metadata(standin):
    driver = GcpProvisioner()
    first, second = launch("cpu-0001"), launch("cpu-0002")
    created = driver.create(definition(standin), [first, second], annotations={"a.b/c": "d"})
    assert [c.instance_id for c in created] == [f"{ZONE}/cpu-0001", f"{ZONE}/cpu-0002"]
    assert standin.count("POST", "/instances") == 2
    assert standin.user_data(ZONE, "cpu-0001") == first.user_data
    items = {i["key"]: i["value"] for i in created_body(standin, "cpu-0002")["metadata"]["items"]}
    assert items["fuzzball-instance"] == "cpu-0002"
    assert items["fuzzball-definition"] == "cpu"
    assert json.loads(items["fuzzball-annotations"]) == {"a.b/c": "d"}
    labels = created_body(standin, "cpu-0001")["labels"]
    assert labels == {"fuzzball-cluster": "test", "fuzzball-definition": "cpu"}


def test_a_name_compute_engine_refuses_is_replaced_and_kept_in_metadata(standin):
    driver = GcpProvisioner()
    (created,) = driver.create(definition(standin), [launch("7-GPU.node")], annotations={})
    name = instance_name("7-GPU.node")
    assert created.instance_id == f"{ZONE}/{name}"
    assert created.name == "7-GPU.node"
    assert driver.describe(created.instance_id).name == "7-GPU.node"
    assert instance_name("7-GPU.node") != instance_name("7-gpu-node")


def test_spot_market_asks_for_spot_capacity_deleted_on_preemption(standin):
    driver = GcpProvisioner()
    driver.create(definition(standin, market="spot"), [launch()], annotations={})
    scheduling = created_body(standin, "cpu-0001")["scheduling"]
    assert scheduling["provisioningModel"] == "SPOT"
    assert scheduling["instanceTerminationAction"] == "DELETE"


def test_accelerators_are_attached_and_stop_live_migration(standin):
    driver = GcpProvisioner()
    spec = definition(standin, accelerators={"nvidia-tesla-t4": 2})
    driver.create(spec, [launch()], annotations={})
    body = created_body(standin, "cpu-0001")
    assert body["guestAccelerators"] == [
        {"acceleratorType": f"zones/{ZONE}/acceleratorTypes/nvidia-tesla-t4", "acceleratorCount": 2}
    ]
    assert body["scheduling"]["onHostMaintenance"] == "TERMINATE"


def test_delete_is_one_call_however_often_it_is_asked(standin):
    driver = GcpProvisioner()
    spec = definition(standin)
    driver.check_definition(spec)
    (created,) = driver.create(spec, [launch()], annotations={})
    for _ in range(3):
        driver.delete(created.instance_id)
    assert standin.count("DELETE") == 1
    assert driver.describe(created.instance_id) is None
    assert driver.list_instances() == []


def test_list_shows_this_clusters_instances_in_every_zone(standin):
    driver = GcpProvisioner()
    spec = definition(standin)
    driver.check_definition(spec)
    driver.create(spec, [launch("cpu-0001")], annotations={})
    driver.create(spec, [launch("cpu-0002")], annotations={}, directives={"zone": "europe-west4-b"})
    GcpProvisioner().create(definition(standin, cluster="other"), [launch("x-1")], annotations={})
    listed = sorted((i.instance_id, i.name) for i in driver.list_instances())
    assert listed == [("europe-west4-b/cpu-0002", "cpu-0002"), (f"{ZONE}/cpu-0001", "cpu-0001")]
    assert all(
        i.state in (InstanceState.CREATING, InstanceState.CREATED) for i in driver.list_instances()
    )


def test_a_bad_setting_or_directive_is_refused_naming_it(standin):
    driver = GcpProvisioner()
    with pytest.raises(InvalidArgument, match=r"config\.zone: .*not a Compute Engine zone"):
        driver.check_definition(definition(standin, zone="the-moon"))
    with pytest.raises(InvalidArgument, match=r"config\.cluster: .*label value"):
        driver.check_definition(definition(standin, cluster="Not A Label"))
    with pytest.raises(InvalidArgument, match="reservation not understood"):
        driver.create(
            definition(standin), [launch()], annotations={}, directives={"reservation": "r"}
        )
    assert standin.count("POST", "/instances") == 0


def test_an_unreadable_key_file_is_refused_without_quoting_it(standin, tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('{"type": "service_account", "private_key": "PRIVATE-KEY-TEXT"}')
    driver = GcpProvisioner()
    with pytest.raises(InvalidArgument) as refused:
        driver.check_definition(definition(standin, **{"credentials-file": str(broken)}))
    assert "credentials-file" in str(refused.value)
    assert "PRIVATE-KEY-TEXT" not in str(refused.value)


def test_a_project_the_account_may_not_use_is_permission_denied_naming_the_call(standin):
    driver = GcpProvisioner()
    with pytest.raises(PermissionDenied, match=r"gcp: instances\.insert: 403"):
        driver.create(definition(standin, project="someone-elses"), [launch()], annotations={})


def test_neither_the_token_nor_the_private_key_reaches_any_log(standin, caplog):
    caplog.set_level(logging.DEBUG)
    driver = GcpProvisioner()
    spec = definition(standin)
    driver.check_definition(spec)
    (created,) = driver.create(spec, [launch()], annotations={})
    driver.list_instances()
    driver.delete(created.instance_id)
    assert "gcp: started" in caplog.text
    key = json.loads(Path(spec.driver_config["credentials-file"]).read_text())["private_key"]
    assert TOKEN not in caplog.text
    assert key.splitlines()[1] not in caplog.text
