"""A provisioner definition removed from the configuration while it still has instances:
Orchestrate refuses to start naming it and them (nothing could delete them otherwise), and a
record whose definition is gone never ends a round for the others."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.cluster import build_orchestrate, free_port
from support.scripted_provisioner import ScriptedProvisioner

from fuzzball_core.config import ProvisionerConfig, parse_config
from fuzzball_core.drivers import NodeBootstrap
from fuzzball_core.errors import FailedPrecondition
from fuzzball_core.orchestrate.provisioning import Provisioning
from fuzzball_core.orchestrate.provisioning_store import SqlInstanceStore
from fuzzball_core.store.database import connect, migrate, session_factory
from fuzzball_core.vocabulary import InstanceState

BIG = {"id": "big", "driver": "scripted", "cores": 64, "memory": "64GiB", "idle-timeout": 60}
SMALL = {"id": "small", "driver": "scripted", "cores": 4, "memory": "8GiB", "idle-timeout": 60}


def started(
    url: str, driver: ScriptedProvisioner, clock: list[float], *definitions: dict[str, Any]
) -> Provisioning:
    engine = connect(url)
    migrate(engine)
    return Provisioning(
        ProvisionerConfig.model_validate({"definitions": list(definitions)}),
        {"scripted": driver},
        node_address="127.0.0.1:1",
        clock=lambda: clock[0],
        store=SqlInstanceStore(session_factory(engine)),
    )


def registered(provisioning: Provisioning, driver: ScriptedProvisioner, definition: str) -> str:
    provisioning.create(definition, 1)
    bootstrap = NodeBootstrap.parse(driver.launches[-1].user_data)
    provisioning.register(bootstrap.node_name, bootstrap.registration_token, {})
    return bootstrap.node_name


def test_a_restart_without_a_definition_that_has_instances_is_refused_naming_them(tmp_path):
    url, clock, driver = f"sqlite:///{tmp_path / 'store.db'}", [1000.0], ScriptedProvisioner()
    name = registered(started(url, driver, clock, BIG, SMALL), driver, "big")
    again = started(url, driver, clock, SMALL)
    with pytest.raises(FailedPrecondition) as refused:
        again.check_instances_defined()
    assert "provisioner definition big: removed from the configuration while it still has" in (
        refused.value.message
    )
    assert f"{name} (CREATED)" in refused.value.message


def test_a_restart_without_a_definition_whose_instances_are_deleted_starts(tmp_path):
    url, clock, driver = f"sqlite:///{tmp_path / 'store.db'}", [1000.0], ScriptedProvisioner()
    first = started(url, driver, clock, BIG, SMALL)
    (record,) = first.create("big", 1)
    first.delete(record.id)
    started(url, driver, clock, SMALL).check_instances_defined()


def test_orchestrate_refuses_to_start_without_a_definition_that_has_instances(tmp_path: Path):
    url, clock, driver = f"sqlite:///{tmp_path / 'store.db'}", [1000.0], ScriptedProvisioner()
    registered(started(url, driver, clock, BIG), driver, "big")
    config = parse_config(
        {
            "data-dir": str(tmp_path / "data"),
            "database": {"url": url},
            "orchestrate": {"grpc-listen": f"127.0.0.1:{free_port()}", "node-token": "t"},
            "tls": {"plaintext": True},
        }
    )
    with pytest.raises(FailedPrecondition, match="provisioner definition big: removed"):
        build_orchestrate(config)


def test_a_record_without_its_definition_never_ends_a_round_for_the_others(tmp_path):
    url, clock, driver = f"sqlite:///{tmp_path / 'store.db'}", [1000.0], ScriptedProvisioner()
    first = started(url, driver, clock, BIG, SMALL)
    registered(first, driver, "big")
    small = registered(first, driver, "small")
    again = started(url, driver, clock, SMALL)  # its refusal at start-up not asked
    clock[0] += 61
    again.sweep({small: 1000.0})
    again.reconcile()
    again.torn_down(small)
    assert driver.deleted == ["i-2"]
    assert [r.state for r in again.records()] == [InstanceState.CREATED, InstanceState.DELETED]
