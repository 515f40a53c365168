"""EC2 instances whose RunInstances answer Orchestrate never got are found by their
``fuzzball-instance`` tag and terminated if they never register: the real ``aws`` driver and
provisioning loop, with moto's server standing in for EC2 (no EC2 is reachable from the
tests; moto keeps the instances and their tags, and records each action the driver sends)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from support.moto_ec2 import MotoEc2

from fuzzball_core.config import ProvisionerConfig
from fuzzball_core.errors import Unavailable
from fuzzball_core.orchestrate.provisioning import Provisioning
from fuzzball_core.orchestrate.provisioning_store import SqlInstanceStore
from fuzzball_core.store.database import connect, migrate, session_factory
from fuzzball_core.vocabulary import InstanceState
from fuzzball_provisioners.aws import AwsProvisioner

#: moto's server: more than 6 s for the file on the 2-core CI machine
pytestmark = pytest.mark.slow

DEADLINE, GRACE = 60, 60


@pytest.fixture(scope="module")
def moto_server() -> Iterator[MotoEc2]:
    server = MotoEc2()
    yield server
    server.close()


@pytest.fixture
def moto(moto_server: MotoEc2) -> MotoEc2:
    moto_server.reset()
    return moto_server


class ReadTimeout(AwsProvisioner):
    """EC2 started the instance, but RunInstances' answer never arrived."""

    def launch(self, *args: Any, **kwargs: Any) -> Any:
        super().launch(*args, **kwargs)
        raise Unavailable("aws: RunInstances: Read timeout on endpoint URL")


class Killed(BaseException):
    """Orchestrate killed after RunInstances answered, before the instance id was written."""


class KilledAfterCreate(AwsProvisioner):
    def create(self, *args: Any, **kwargs: Any) -> Any:
        super().create(*args, **kwargs)
        raise Killed


def loop(moto: MotoEc2, driver: AwsProvisioner, clock: list[float], **more: Any) -> Provisioning:
    config = ProvisionerConfig.model_validate(
        {
            "definitions": [
                {
                    "id": "cpu",
                    "driver": "aws",
                    "cores": 4,
                    "memory": "8GiB",
                    "max-nodes": 1,
                    "config": moto.driver_config(
                        **{"instance-type": "m5.xlarge", "image": "ami-12345678"}
                    ),
                }
            ],
            "registration-deadline": DEADLINE,
            "unregistered-grace": GRACE,
        }
    )
    return Provisioning(
        config, {"aws": driver}, node_address="127.0.0.1:1", clock=lambda: clock[0], **more
    )


def test_an_instance_whose_run_instances_answer_timed_out_is_terminated_unregistered(moto):
    clock = [1000.0]
    provisioning = loop(moto, ReadTimeout(), clock)
    (record,) = provisioning.create("cpu", 1)
    (started,) = moto.states()
    assert record.state is InstanceState.CREATING  # it may exist: still counted
    assert provisioning.live("cpu") == 1
    provisioning.reconcile()
    assert record.driver_id == started
    clock[0] += DEADLINE + GRACE + 1
    provisioning.sweep({})
    assert moto.calls("TerminateInstances") == [(started,)]
    assert record.state is InstanceState.DELETED


def test_an_instance_started_just_before_a_restart_is_terminated_unregistered(moto, tmp_path):
    clock = [1000.0]
    engine = connect(f"sqlite:///{tmp_path / 'store.db'}")
    migrate(engine)
    first = loop(moto, KilledAfterCreate(), clock, store=SqlInstanceStore(session_factory(engine)))
    with pytest.raises(Killed):
        first.create("cpu", 1)
    (started,) = moto.states()
    again = loop(moto, AwsProvisioner(), clock, store=SqlInstanceStore(session_factory(engine)))
    (record,) = again.instances.values()
    clock[0] += DEADLINE + GRACE + 1
    again.sweep({})  # no reconcile ran: the delete itself looks for it by its tag
    assert moto.calls("TerminateInstances") == [(started,)]
    assert record.state is InstanceState.DELETED
