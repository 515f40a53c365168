"""The ``oci`` provisioner against a recorded-shape stand-in for OCI's Core Services API.

No OCI emulator exists, so these tests run the real SDK (the oci package, signing every request
with an API key) against support.oci_standin: an HTTP server on loopback that checks each
request's signature and answers the calls the driver makes with the real API's JSON shapes.
It is a stand-in, not OCI: it starts no machines and checks no capacity.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from support.oci_standin import COMPARTMENT, OciStandIn

from fuzzball_core.drivers import InstanceSpec, Launch, NodeBootstrap
from fuzzball_core.errors import FailedPrecondition, InvalidArgument
from fuzzball_core.vocabulary import InstanceState
from fuzzball_provisioners.oci import OciProvisioner

#: more than 6 s for the file on the 2-core CI machine (tests/conftest.py's rule)
pytestmark = pytest.mark.slow

TOKEN = "one-time-registration-token-for-the-oci-test-0123456789"


@pytest.fixture
def standin(tmp_path: Path) -> Iterator[OciStandIn]:
    running = OciStandIn(tmp_path)
    yield running
    running.close()


def definition(standin: OciStandIn, **config: Any) -> InstanceSpec:
    settings = standin.driver_config(
        standin.key_file(),
        cluster="test",
        shape="VM.Standard.E4.Flex",
        ocpus=2,
        image="ocid1.image.oc1.iad.aaaanodeimage",
        **{
            "memory-gb": 16,
            "availability-domain": "Uocm:US-ASHBURN-AD-1",
            "subnet-id": "ocid1.subnet.oc1.iad.aaaasubnet",
        },
    )
    return InstanceSpec(
        definition="cpu", cores=4, memory=16 << 30, driver_config={**settings, **config}
    )


def launch(name: str = "cpu-0001") -> Launch:
    bootstrap = NodeBootstrap(
        orchestrate_address="10.0.0.1:50051", node_name=name, registration_token=TOKEN
    )
    return Launch(name, bootstrap.render())


def body(standin: OciStandIn, instance_id: str) -> dict[str, Any]:
    return standin.instances[instance_id].body


def test_each_launch_is_one_signed_launch_instance_with_its_user_data(standin):
    driver = OciProvisioner()
    first, second = launch("cpu-0001"), launch("cpu-0002")
    created = driver.create(definition(standin), [first, second], annotations={"a/b": "c"})
    assert [c.name for c in created] == ["cpu-0001", "cpu-0002"]
    assert standin.count("POST") == 2
    assert standin.user_data(created[0].instance_id) == first.user_data
    launched = body(standin, created[1].instance_id)
    assert launched["displayName"] == "cpu-0002"
    assert launched["compartmentId"] == COMPARTMENT
    assert launched["shapeConfig"] == {"ocpus": 2.0, "memoryInGBs": 16.0}
    assert launched["freeformTags"] == {
        "fuzzball-cluster": "test",
        "fuzzball-definition": "cpu",
        "fuzzball-instance": "cpu-0002",
    }
    assert json.loads(launched["metadata"]["fuzzball-annotations"]) == {"a/b": "c"}


def test_instances_answer_only_the_v2_metadata_endpoints(standin):
    driver = OciProvisioner()
    (created,) = driver.create(definition(standin), [launch()], annotations={})
    assert body(standin, created.instance_id)["instanceOptions"] == {
        "areLegacyImdsEndpointsDisabled": True
    }


def test_spot_market_launches_preemptible_capacity_terminated_on_preemption(standin):
    driver = OciProvisioner()
    (created,) = driver.create(definition(standin, market="spot"), [launch()], annotations={})
    assert body(standin, created.instance_id)["preemptibleInstanceConfig"] == {
        "preemptionAction": {"type": "TERMINATE", "preserveBootVolume": False}
    }


def test_delete_terminates_once_however_often_it_is_asked(standin):
    driver = OciProvisioner()
    spec = definition(standin)
    driver.check_definition(spec)
    (created,) = driver.create(spec, [launch()], annotations={})
    for _ in range(3):
        driver.delete(created.instance_id)
    assert standin.count("DELETE") == 1
    assert driver.describe(created.instance_id).state is InstanceState.DELETED
    assert driver.list_instances() == []


def test_list_pages_through_the_compartment_keeping_this_clusters_instances(standin):
    driver = OciProvisioner()
    spec = definition(standin)
    driver.check_definition(spec)
    names = [f"cpu-000{n}" for n in range(1, 5)]
    driver.create(spec, [launch(n) for n in names], annotations={})
    OciProvisioner().create(definition(standin, cluster="other"), [launch("x-1")], annotations={})
    assert sorted(i.name for i in driver.list_instances()) == names


def test_a_flexible_shape_without_ocpus_is_refused_naming_it(standin):
    driver = OciProvisioner()
    spec = definition(standin)
    config = {k: v for k, v in spec.driver_config.items() if k != "ocpus"}
    with pytest.raises(InvalidArgument, match=r"VM.Standard.E4.Flex\) needs ocpus"):
        driver.check_definition(InstanceSpec("cpu", 4, 1, driver_config=config))


def test_a_key_oci_does_not_accept_is_a_failed_precondition_naming_the_call(standin, tmp_path):
    other = tmp_path / "other.pem"
    other.write_bytes(
        rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    driver = OciProvisioner()
    with pytest.raises(FailedPrecondition, match="oci: LaunchInstance: 401 NotAuthenticated"):
        driver.create(definition(standin, **{"key-file": str(other)}), [launch()], annotations={})


def test_neither_the_token_nor_the_api_key_reaches_any_log(standin, caplog):
    caplog.set_level(logging.DEBUG)
    driver = OciProvisioner()
    spec = definition(standin)
    driver.check_definition(spec)
    (created,) = driver.create(spec, [launch()], annotations={})
    driver.list_instances()
    driver.delete(created.instance_id)
    assert "oci: started" in caplog.text
    key_line = Path(spec.driver_config["key-file"]).read_text().splitlines()[1]
    encoded = base64.b64encode(launch().user_data.encode()).decode()
    for secret in (TOKEN, key_line, encoded[:40]):
        assert secret not in caplog.text
