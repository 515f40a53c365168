"""The ``aws`` provisioner against moto's server over HTTP.

moto stands in for EC2 here (no EC2 is reachable from the tests): boto3 sends its real
requests to moto's server on loopback, which answers in EC2's XML and keeps the instances
(their user data, tags, market and metadata options). moto starts no machines; the
end-to-end test (test_aws_provisioning_e2e.py) boots a Substrate for each.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from botocore import exceptions as botocore_exceptions
from support.moto_ec2 import SECRET_ACCESS_KEY, MotoEc2

from fuzzball_core.drivers import InstanceSpec, Launch, NodeBootstrap
from fuzzball_core.errors import InvalidArgument
from fuzzball_core.vocabulary import InstanceState
from fuzzball_provisioners.aws import NVLINK_FAMILIES, AwsProvisioner

#: more than 6 s for the file on the 2-core CI machine (tests/conftest.py's rule)
pytestmark = pytest.mark.slow

TOKEN = "one-time-registration-token-for-this-test-0123456789"
CA_PEM = "-----BEGIN CERTIFICATE-----\nTUlJQ0xFU1RDQQ==\n-----END CERTIFICATE-----\n"
FABRIC_MANAGER_AMI = "ami-0fabric0manager0"
#: moto checks no AMI; any well-formed id will do
NODE_AMI = "ami-0fuzzball0node00"


@pytest.fixture(scope="module")
def moto_server() -> Iterator[MotoEc2]:
    server = MotoEc2()
    yield server
    server.close()


@pytest.fixture
def moto(moto_server: MotoEc2) -> MotoEc2:
    """The module's server, emptied: no instances, no calls recorded."""
    moto_server.reset()
    return moto_server


def definition(moto: MotoEc2, **config: Any) -> InstanceSpec:
    settings = moto.driver_config(
        **{"instance-type": "m5.xlarge", "image": NODE_AMI, "cluster": "test"}
    )
    return InstanceSpec(
        definition="cpu", cores=4, memory=16 << 30, driver_config={**settings, **config}
    )


def launch(name: str = "cpu-0001") -> Launch:
    bootstrap = NodeBootstrap(
        orchestrate_address="10.0.0.1:50051",
        node_name=name,
        registration_token=TOKEN,
        ca_pem=CA_PEM,
    )
    return Launch(name, bootstrap.render())


def create(driver: AwsProvisioner, spec: InstanceSpec, *launches: Launch, **more: Any) -> Any:
    more.setdefault("annotations", {})
    return driver.create(spec, list(launches) or [launch()], **more)


def tags(moto: MotoEc2, instance_id: str) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in moto.instance(instance_id).get("Tags", [])}


def test_each_launch_is_one_run_instances_booting_its_own_user_data(moto):
    driver = AwsProvisioner()
    first, second = launch("cpu-0001"), launch("cpu-0002")
    created = create(driver, definition(moto), first, second)
    assert [c.name for c in created] == ["cpu-0001", "cpu-0002"]
    assert all(c.state is InstanceState.CREATING for c in created)
    assert len(moto.calls("RunInstances")) == 2
    assert moto.user_data(created[0].instance_id) == first.user_data
    assert moto.user_data(created[1].instance_id) == second.user_data


def test_user_data_carries_the_token_and_the_clusters_ca_and_no_aws_credential(moto):
    driver = AwsProvisioner()
    (created,) = create(driver, definition(moto))
    user_data = moto.user_data(created.instance_id)
    booted = NodeBootstrap.parse(user_data)
    assert booted.registration_token == TOKEN
    assert booted.ca_pem == CA_PEM
    assert SECRET_ACCESS_KEY not in user_data
    assert "AKIA" not in user_data


def test_instances_require_imdsv2_with_one_hop(moto):
    driver = AwsProvisioner()
    (created,) = create(driver, definition(moto))
    options = moto.instance(created.instance_id)["MetadataOptions"]
    assert options["HttpTokens"] == "required"
    assert options["HttpPutResponseHopLimit"] == 1
    assert options["HttpEndpoint"] == "enabled"


def test_instances_are_tagged_with_cluster_definition_name_and_annotations(moto):
    driver = AwsProvisioner()
    spec = definition(moto, tags={"team": "hpc"})
    (created,) = create(driver, spec, annotations={"gpu.vendor": "nvidia"})
    assert tags(moto, created.instance_id) == {
        "Name": "cpu-0001",
        "fuzzball-instance": "cpu-0001",
        "fuzzball-cluster": "test",
        "fuzzball-definition": "cpu",
        "fuzzball-annotation:gpu.vendor": "nvidia",
        "team": "hpc",
    }


@pytest.mark.parametrize("family", sorted(NVLINK_FAMILIES))
def test_nvlink_instance_types_boot_the_fabric_manager_image(moto, family):
    driver = AwsProvisioner()
    size = "48xlarge" if family.startswith("p5") else "24xlarge"
    spec = definition(
        moto, **{"instance-type": f"{family}.{size}", "fabric-manager-image": FABRIC_MANAGER_AMI}
    )
    (created,) = create(driver, spec)
    assert moto.instance(created.instance_id)["ImageId"] == FABRIC_MANAGER_AMI


def test_other_instance_types_boot_the_definitions_image(moto):
    driver = AwsProvisioner()
    spec = definition(moto, **{"fabric-manager-image": FABRIC_MANAGER_AMI})
    (created,) = create(driver, spec)
    assert moto.instance(created.instance_id)["ImageId"] == spec.driver_config["image"]


def test_an_nvlink_definition_without_a_fabric_manager_image_is_refused_naming_it(moto):
    driver = AwsProvisioner()
    spec = definition(moto, **{"instance-type": "p5.48xlarge"})
    with pytest.raises(InvalidArgument, match=r"p5\.48xlarge .* fabric-manager-image"):
        driver.check_definition(spec)
    assert moto.calls("RunInstances") == []


def test_spot_market_asks_for_a_one_time_spot_instance(moto):
    driver = AwsProvisioner()
    (spot,) = create(driver, definition(moto, market="spot", **{"max-spot-price": "0.50"}))
    (on_demand,) = create(driver, definition(moto), launch("cpu-0002"))
    assert moto.instance(spot.instance_id).get("InstanceLifecycle") == "spot"
    assert "InstanceLifecycle" not in moto.instance(on_demand.instance_id)


def test_a_market_directive_applies_to_that_request_only(moto):
    driver = AwsProvisioner()
    (spot,) = create(driver, definition(moto), directives={"market": "spot"})
    assert moto.instance(spot.instance_id).get("InstanceLifecycle") == "spot"


def test_a_directive_the_driver_does_not_know_is_refused_naming_it(moto):
    driver = AwsProvisioner()
    with pytest.raises(InvalidArgument, match="placement-group not understood"):
        create(driver, definition(moto), directives={"placement-group": "x"})
    with pytest.raises(InvalidArgument, match=r"backendDirectives\.market"):
        create(driver, definition(moto), directives={"market": "cheap"})
    assert moto.calls("RunInstances") == []


def test_delete_terminates_once_however_often_it_is_asked(moto):
    driver = AwsProvisioner()
    spec = definition(moto)
    driver.check_definition(spec)
    (created,) = create(driver, spec)
    for _ in range(3):
        driver.delete(created.instance_id)
    assert moto.calls("TerminateInstances") == [(created.instance_id,)]
    described = driver.describe(created.instance_id)
    assert described is not None and described.state is InstanceState.DELETED


def test_delete_leaves_an_instance_that_is_not_this_clusters_alone(moto):
    driver = AwsProvisioner()
    driver.check_definition(definition(moto))
    stranger = moto.client.run_instances(ImageId=NODE_AMI, MinCount=1, MaxCount=1)
    stranger_id = stranger["Instances"][0]["InstanceId"]
    driver.delete(stranger_id)
    driver.delete("i-0123456789abcdef0")
    assert moto.calls("TerminateInstances") == []
    assert moto.states()[stranger_id] == "running"
    assert driver.describe(stranger_id) is None


def test_list_shows_this_clusters_live_instances_with_their_names(moto):
    driver = AwsProvisioner()
    spec = definition(moto)
    driver.check_definition(spec)
    kept, deleted = create(driver, spec, launch("cpu-0001"), launch("cpu-0002"))
    other = definition(moto, cluster="another")
    create(AwsProvisioner(), other, launch("other-0001"))
    driver.delete(deleted.instance_id)
    listed = driver.list_instances()
    assert [(i.instance_id, i.name, i.definition) for i in listed] == [
        (kept.instance_id, "cpu-0001", "cpu")
    ]


def test_a_fresh_driver_finds_the_instances_of_the_definitions_it_is_shown(moto):
    spec = definition(moto)
    (created,) = create(AwsProvisioner(), spec)
    restarted = AwsProvisioner()
    restarted.check_definition(spec)
    assert [i.instance_id for i in restarted.list_instances()] == [created.instance_id]


def test_an_unknown_setting_is_refused_naming_it(moto):
    driver = AwsProvisioner()
    with pytest.raises(InvalidArgument, match=r"definition cpu: config\.instance-typo: unknown"):
        driver.check_definition(definition(moto, **{"instance-typo": "m5.large"}))


def test_a_settings_error_names_the_key_and_never_the_secret(moto):
    driver = AwsProvisioner()
    spec = definition(moto)
    config = {k: v for k, v in spec.driver_config.items() if k != "access-key-id"}
    lonely = InstanceSpec(definition="cpu", cores=1, memory=1, driver_config=config)
    with pytest.raises(InvalidArgument) as refused:
        driver.check_definition(lonely)
    assert "access-key-id and secret-access-key go together" in str(refused.value)
    assert SECRET_ACCESS_KEY not in str(refused.value)


def test_an_ec2_refusal_is_an_error_naming_the_call_and_its_code(moto):
    driver = AwsProvisioner()
    spec = definition(moto, **{"subnet-id": "subnet-00000000"})
    with pytest.raises(InvalidArgument, match=r"aws: RunInstances: InvalidSubnetID\.NotFound"):
        create(driver, spec)


def test_a_launch_whose_answer_timed_out_is_answered_creating_without_an_id(moto):
    driver = AwsProvisioner()
    spec = definition(moto)
    driver.check_definition(spec)
    accounts = driver.accounts.of(spec)
    ec2 = accounts[1]
    real = ec2.run_instances

    def timed_out(**request: Any) -> Any:
        real(**request)  # EC2 started it; the answer is lost
        raise botocore_exceptions.ReadTimeoutError(endpoint_url="https://ec2.test")

    ec2.run_instances = timed_out
    (answer,) = create(driver, spec)
    assert (answer.state, answer.instance_id) == (InstanceState.CREATING, "")
    assert "Read timeout" in answer.detail
    assert [i.name for i in driver.list_instances()] == ["cpu-0001"]


def test_neither_the_token_nor_the_secret_key_reaches_any_log(moto, caplog):
    caplog.set_level(logging.DEBUG)
    driver = AwsProvisioner()
    spec = definition(moto)
    driver.check_definition(spec)
    (created,) = create(driver, spec)
    driver.list_instances()
    driver.describe(created.instance_id)
    driver.delete(created.instance_id)
    with pytest.raises(InvalidArgument):
        create(driver, definition(moto, **{"subnet-id": "subnet-00000000"}))
    text = caplog.text
    assert "aws: started" in text  # the driver's own records are there
    encoded = base64.b64encode(launch().user_data.encode()).decode()
    for secret in (TOKEN, SECRET_ACCESS_KEY, encoded[:40]):
        assert secret not in text
