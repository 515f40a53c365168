"""The provisioning loop's records in Orchestrate's database (provisioning_store.py): a
restarted Orchestrate knows its instances again, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from support.scripted_provisioner import ScriptedProvisioner

from fuzzball_core.config import ProvisionerConfig
from fuzzball_core.drivers import NodeBootstrap
from fuzzball_core.orchestrate.provisioning import Provisioning
from fuzzball_core.orchestrate.provisioning_store import SqlInstanceStore
from fuzzball_core.store.database import connect, migrate, session_factory
from fuzzball_core.vocabulary import InstanceState

CONFIG = ProvisionerConfig.model_validate(
    {
        "definitions": [
            {
                "id": "small",
                "driver": "scripted",
                "cores": 4,
                "memory": "8GiB",
                "idle-timeout": 60,
                "annotations": {"pool": "small"},
            }
        ]
    }
)


def started(database_url: str, driver: ScriptedProvisioner, clock: list[float]) -> Provisioning:
    """Orchestrate's provisioning as it starts: the records read back from the database."""
    engine = connect(database_url)
    migrate(engine)
    return Provisioning(
        CONFIG,
        {"scripted": driver},
        node_address="127.0.0.1:1",
        clock=lambda: clock[0],
        store=SqlInstanceStore(session_factory(engine)),
    )


def test_a_restarted_orchestrate_does_not_delete_a_deleted_instance_again(database_url):
    clock, driver = [1000.0], ScriptedProvisioner()
    first = started(database_url, driver, clock)
    (record,) = first.create("small", 1, annotations={"team": "ml"})
    bootstrap = NodeBootstrap.parse(driver.launches[0].user_data)
    first.register(bootstrap.node_name, bootstrap.registration_token, {})
    clock[0] += 61
    first.sweep({bootstrap.node_name: 1000.0})
    again = started(database_url, driver, clock)
    again.sweep({bootstrap.node_name: 1000.0})
    again.torn_down(bootstrap.node_name)
    assert driver.deleted == ["i-1"]
    assert again.instances[record.id].state is InstanceState.DELETED


def test_a_restarted_orchestrate_lets_its_instances_register_with_their_annotations(
    database_url,
):
    clock, driver = [1000.0], ScriptedProvisioner()
    started(database_url, driver, clock).create("small", 1, annotations={"team": "ml"})
    bootstrap = NodeBootstrap.parse(driver.launches[0].user_data)
    again = started(database_url, driver, clock)
    carried = again.register(bootstrap.node_name, bootstrap.registration_token, {})
    assert (carried["pool"], carried["team"]) == ("small", "ml")


def test_a_restarted_orchestrate_keeps_each_instances_history(database_url):
    clock, driver = [1000.0], ScriptedProvisioner()
    (record,) = started(database_url, driver, clock).create("small", 1)
    history = started(database_url, driver, clock).instances[record.id].history
    assert [kind for _, kind, _ in history] == ["instance_requested"]


class _Killed(BaseException):
    """Orchestrate killed between the driver's answer and the record of its id."""


def test_an_instance_created_just_before_a_restart_is_found_and_deleted_unregistered(database_url):
    clock, driver = [1000.0], ScriptedProvisioner()
    first = started(database_url, driver, clock)
    original = driver.create

    def killed(*args, **kwargs):
        original(*args, **kwargs)
        raise _Killed

    driver.create = killed
    with pytest.raises(_Killed):
        first.create("small", 1)
    driver.create = original
    again = started(database_url, driver, clock)
    (record,) = again.instances.values()
    assert (record.state, record.driver_id) == (InstanceState.CREATING, "")
    again.reconcile()
    clock[0] += 600 + 900 + 1  # the default registration deadline and grace
    again.sweep({})
    assert driver.deleted == ["i-1"]
    assert started(database_url, driver, clock).instances[record.id].state is InstanceState.DELETED
