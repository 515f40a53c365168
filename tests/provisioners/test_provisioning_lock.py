"""The provisioning loop's lock is never held across a driver call: a cloud call that takes
minutes (GCP waits up to 300 s per launch) must not hold up a node's registration, nor
``holder()``, which the node API calls on Orchestrate's event loop."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from support.scripted_provisioner import ScriptedProvisioner

from fuzzball_core.config import ProvisionerConfig
from fuzzball_core.drivers import NodeBootstrap, ProvisionedInstance
from fuzzball_core.errors import InvalidArgument
from fuzzball_core.orchestrate.provisioning import Provisioning
from fuzzball_core.vocabulary import InstanceState

#: how long a call that must not wait may take, at most (the blocked driver waits 30 s)
PROMPT = 2.0


class SlowCloud(ScriptedProvisioner):
    """Creates once the test lets it: ``entered`` is set while a create call is blocked."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()
        self.blocking = False

    def create(self, *args: Any, **kwargs: Any) -> Sequence[ProvisionedInstance]:
        if self.blocking:
            self.entered.set()
            self.release.wait(30)
        return super().create(*args, **kwargs)


def loop(driver: ScriptedProvisioner) -> Provisioning:
    config = ProvisionerConfig.model_validate(
        {
            "definitions": [
                {"id": "small", "driver": "scripted", "cores": 4, "memory": "8GiB", "max-nodes": 2}
            ]
        }
    )
    return Provisioning(config, {"scripted": driver}, node_address="127.0.0.1:1")


def promptly(call: Callable[[], Any]) -> Any:
    """``call``'s result, failing the test when it waited for the blocked driver."""
    started = time.monotonic()
    result = call()
    assert time.monotonic() - started < PROMPT
    return result


@pytest.fixture
def blocked() -> Any:
    """A loop with one registered instance, and a second create blocked in the driver."""
    driver = SlowCloud()
    provisioning = loop(driver)
    provisioning.create("small", 1)
    first = NodeBootstrap.parse(driver.launches[0].user_data)
    driver.blocking = True
    creating = threading.Thread(target=provisioning.create, args=("small", 1))
    creating.start()
    assert driver.entered.wait(10)
    yield provisioning, driver, first
    driver.release.set()
    creating.join(30)


def test_holder_answers_while_a_create_call_is_blocked(blocked):
    provisioning, _, first = blocked
    found = promptly(lambda: provisioning.holder(first.registration_token))
    assert found is not None and found.name == first.node_name


def test_a_node_registers_while_a_create_call_is_blocked(blocked):
    provisioning, _, first = blocked
    promptly(lambda: provisioning.register(first.node_name, first.registration_token, {}))
    assert provisioning.holder(first.registration_token).state is InstanceState.CREATED


def test_an_instance_being_created_counts_against_max_nodes(blocked):
    provisioning, _, _ = blocked
    with pytest.raises(InvalidArgument, match="max-nodes 2 of small"):
        promptly(lambda: provisioning.create("small", 1))


def test_an_instance_deleted_while_its_create_call_is_blocked_is_deleted_once_answered():
    driver = SlowCloud()
    provisioning = loop(driver)
    driver.blocking = True
    creating = threading.Thread(target=provisioning.create, args=("small", 1))
    creating.start()
    assert driver.entered.wait(10)
    (record,) = provisioning.records()
    promptly(lambda: provisioning.delete(record.id))
    assert record.state is InstanceState.DELETING
    provisioning.sweep({})  # the delete is the create call's thread's: not called twice
    driver.release.set()
    creating.join(30)
    assert driver.deleted == ["i-1"]
    assert record.state is InstanceState.DELETED
