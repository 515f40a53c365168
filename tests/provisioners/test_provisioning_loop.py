"""The provisioning loop's decisions (fuzzball_core/orchestrate/provisioning.py) against a
driver that records its calls: the release notes' provisioning failures, one test each."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from support.scripted_provisioner import ScriptedProvisioner

from fuzzball_core.config import ProvisionerConfig
from fuzzball_core.drivers import NodeBootstrap
from fuzzball_core.errors import InvalidArgument, Unauthenticated, Unavailable
from fuzzball_core.orchestrate.provisioning import Provisioning
from fuzzball_core.scheduling import JobRequest, Resources
from fuzzball_core.vocabulary import InstanceState

GIB = 1024**3
NODE_TOKEN = "the-cluster-node-token-never-in-user-data"


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def loop(clock: Clock, driver: ScriptedProvisioner, **definition: Any) -> Provisioning:
    settings = {"id": "small", "driver": "scripted", "cores": 4, "memory": 8 * GIB}
    settings.update(definition)
    config = ProvisionerConfig.model_validate(
        {"definitions": [settings], "registration-deadline": 600, "unregistered-grace": 900}
    )
    return Provisioning(config, {"scripted": driver}, node_address="127.0.0.1:1", clock=clock)


def job(n: int, cores: int = 2, **extra: Any) -> JobRequest:
    return JobRequest(f"run-{n}", Resources(cores, GIB), submitted_at=float(n), **extra)


def boot(provisioning: Provisioning, driver: ScriptedProvisioner, index: int = -1) -> str:
    """Register the launch's node as its Substrate would, from its user data alone."""
    bootstrap = NodeBootstrap.parse(driver.launches[index].user_data)
    provisioning.register(bootstrap.node_name, bootstrap.registration_token, {})
    return bootstrap.node_name


def test_a_burst_of_20_waiting_jobs_never_exceeds_max_nodes() -> None:
    clock, driver = Clock(), ScriptedProvisioner()
    provisioning = loop(clock, driver, **{"max-nodes": 3})
    for _ in range(5):  # every pass sees the whole burst again
        provisioning.scale_up([job(n) for n in range(20)])
    assert len(driver.launches) == 3


def test_a_job_already_waiting_for_an_instance_asks_for_no_other() -> None:
    clock, driver = Clock(), ScriptedProvisioner()
    provisioning = loop(clock, driver, **{"max-nodes": 10})
    provisioning.scale_up([job(1)])
    provisioning.scale_up([job(1)])
    assert len(driver.launches) == 1


def test_an_instance_that_never_registers_is_deleted_after_deadline_and_grace() -> None:
    clock, driver = Clock(), ScriptedProvisioner()
    provisioning = loop(clock, driver)
    provisioning.scale_up([job(1)])
    clock.now += 600 + 900
    provisioning.sweep({})
    assert driver.deleted == []
    clock.now += 1
    provisioning.sweep({})
    assert driver.deleted == ["i-1"]
    assert provisioning.records()[0].state is InstanceState.DELETED


def test_an_idle_node_is_deleted_exactly_once() -> None:
    clock, driver = Clock(), ScriptedProvisioner()
    provisioning = loop(clock, driver, **{"idle-timeout": 60})
    provisioning.scale_up([job(1)])
    name = boot(provisioning, driver)
    idle_since = clock.now
    clock.now += 61
    for _ in range(3):
        provisioning.sweep({name: idle_since})
    provisioning.torn_down(name)
    assert driver.deleted == ["i-1"]


def test_a_busy_node_stays_until_idle_past_the_timeout() -> None:
    clock, driver = Clock(), ScriptedProvisioner()
    provisioning = loop(clock, driver, **{"idle-timeout": 60})
    provisioning.scale_up([job(1)])
    name = boot(provisioning, driver)
    clock.now += 3600
    provisioning.sweep({name: None})
    provisioning.sweep({name: clock.now - 59})
    assert driver.deleted == []


def test_a_node_past_its_ttl_is_deleted_even_when_busy() -> None:
    clock, driver = Clock(), ScriptedProvisioner()
    provisioning = loop(clock, driver, ttl=120)
    provisioning.scale_up([job(1)])
    name = boot(provisioning, driver)
    clock.now += 120
    provisioning.sweep({name: None})
    assert driver.deleted == ["i-1"]


def test_a_node_holding_node_local_volumes_outlives_its_ttl_until_they_are_gone() -> None:
    clock, driver = Clock(), ScriptedProvisioner()
    provisioning = loop(clock, driver, ttl=120)
    provisioning.scale_up([job(1)])
    name = boot(provisioning, driver)
    clock.now += 120
    provisioning.sweep({name: None}, holding={name})
    assert driver.deleted == []
    provisioning.sweep({name: clock.now})  # its volumes were deleted
    assert driver.deleted == ["i-1"]


def test_a_deleted_instance_name_is_never_reused() -> None:
    clock, driver = Clock(), ScriptedProvisioner()
    provisioning = loop(clock, driver, **{"idle-timeout": 1})
    names = set()
    for n in range(5):
        provisioning.scale_up([job(n)])
        names.add(boot(provisioning, driver))
        clock.now += 2
        provisioning.sweep(dict.fromkeys(names, clock.now - 2))
    assert len(names) == 5


def test_a_restarted_node_keeps_its_definition_and_instance_annotations() -> None:
    clock, driver = Clock(), ScriptedProvisioner()
    provisioning = loop(clock, driver, annotations={"pool": "small"})
    (record,) = provisioning.create("small", 1, annotations={"team": "ml"})
    bootstrap = NodeBootstrap.parse(driver.launches[0].user_data)
    first = provisioning.register(bootstrap.node_name, bootstrap.registration_token, {})
    again = provisioning.register(bootstrap.node_name, bootstrap.registration_token, {"x": "1"})
    for carried in (first, again):
        assert carried["pool"] == "small"
        assert carried["team"] == "ml"
        assert carried["fuzzball.provisioner/instance"] == record.id


def test_a_registration_token_registers_only_its_own_instance() -> None:
    clock, driver = Clock(), ScriptedProvisioner()
    provisioning = loop(clock, driver, **{"max-nodes": 2})
    provisioning.create("small", 2)
    first = NodeBootstrap.parse(driver.launches[0].user_data)
    second = NodeBootstrap.parse(driver.launches[1].user_data)
    with pytest.raises(Unauthenticated):
        provisioning.register(second.node_name, first.registration_token, {})


def test_a_deleted_instance_token_registers_nothing() -> None:
    clock, driver = Clock(), ScriptedProvisioner()
    provisioning = loop(clock, driver)
    (record,) = provisioning.create("small", 1)
    bootstrap = NodeBootstrap.parse(driver.launches[0].user_data)
    provisioning.delete(record.id)
    with pytest.raises(Unauthenticated):
        provisioning.register(bootstrap.node_name, bootstrap.registration_token, {})


def test_user_data_holds_the_one_time_token_and_no_other_credential() -> None:
    clock, driver = Clock(), ScriptedProvisioner()
    provisioning = loop(clock, driver)
    provisioning.create("small", 1)
    user_data = driver.launches[0].user_data
    assert NODE_TOKEN not in user_data
    bootstrap = NodeBootstrap.parse(user_data)
    assert bootstrap.registration_token in user_data
    # the token is only in the 0600 file cloud-init writes, never in a command it logs
    assert '"permissions": "0600"' in user_data
    assert bootstrap.registration_token not in user_data.split('"runcmd"')[1]


def test_the_token_is_absent_from_every_event() -> None:
    clock, driver = Clock(), ScriptedProvisioner()
    seen: list[str] = []
    provisioning = loop(clock, driver, **{"idle-timeout": 1})
    provisioning.on_event = lambda kind, message, name: seen.append(message)
    provisioning.scale_up([job(1)])
    name = boot(provisioning, driver)
    clock.now += 5
    provisioning.sweep({name: clock.now - 5})
    token = NodeBootstrap.parse(driver.launches[0].user_data).registration_token
    assert len(seen) >= 4
    assert not [message for message in seen if token in message]


def test_a_job_no_definition_could_hold_is_refused_naming_each_reason() -> None:
    clock, driver = Clock(), ScriptedProvisioner()
    provisioning = loop(clock, driver)
    refusal = provisioning.refusal(job(1, cores=16))
    assert refusal is not None
    assert "small: 16 cores asked, its nodes have 4" in refusal


def test_a_job_some_definition_could_hold_is_not_refused() -> None:
    clock, driver = Clock(), ScriptedProvisioner()
    assert loop(clock, driver).refusal(job(1, cores=4)) is None


def test_workflow_why_names_the_definition_and_the_request_time() -> None:
    clock, driver = Clock(), ScriptedProvisioner()
    provisioning = loop(clock, driver)
    provisioning.scale_up([job(1)])
    assert provisioning.waiting_reason("run-1") == (
        "waiting for a node from definition small, requested at 1970-01-12T13:46:40Z"
    )


def test_create_past_max_nodes_is_refused_saying_how_many_may_be() -> None:
    clock, driver = Clock(), ScriptedProvisioner()
    provisioning = loop(clock, driver, **{"max-nodes": 2})
    with pytest.raises(InvalidArgument, match="max-nodes 2 of small"):
        provisioning.create("small", 3)


def test_directives_the_driver_does_not_understand_are_refused_by_name() -> None:
    clock, driver = Clock(), ScriptedProvisioner()
    with pytest.raises(InvalidArgument, match="spot not understood"):
        loop(clock, driver).create("small", 1, directives={"spot": "true"})


def test_a_failed_create_leaves_error_instances_that_free_their_room() -> None:
    clock, driver = Clock(), ScriptedProvisioner()
    driver.fail_creates = True
    provisioning = loop(clock, driver)
    (record,) = provisioning.create("small", 1)
    assert record.state is InstanceState.ERROR
    assert "out of capacity" in record.detail
    driver.fail_creates = False
    provisioning.scale_up([job(1)])
    assert len(driver.launches) == 1


def test_an_instance_gone_outside_fuzzball_is_marked_deleted_and_frees_its_room() -> None:
    clock, driver = Clock(), ScriptedProvisioner()
    provisioning = loop(clock, driver)
    (record,) = provisioning.create("small", 1)
    driver.existing.clear()  # deleted behind Fuzzball's back
    provisioning.reconcile()
    assert record.state is InstanceState.DELETED
    assert driver.deleted == []
    provisioning.scale_up([job(1)])
    assert len(driver.launches) == 2


def test_a_failed_delete_is_tried_again_on_the_same_instance() -> None:
    clock, driver = Clock(), ScriptedProvisioner()
    provisioning = loop(clock, driver)
    (record,) = provisioning.create("small", 1)
    original = driver.delete
    driver.delete = lambda instance_id: (_ for _ in ()).throw(Unavailable("api down"))
    provisioning.delete(record.id)
    assert record.state is InstanceState.DELETING
    driver.delete = original
    provisioning.sweep({})
    provisioning.sweep({})
    assert record.state is InstanceState.DELETED
    assert driver.deleted == ["i-1"]


def test_a_lost_create_answer_is_found_by_name_and_deleted_if_it_never_registers() -> None:
    clock, driver = Clock(), ScriptedProvisioner()
    driver.lose_answers = True
    provisioning = loop(clock, driver)
    (record,) = provisioning.create("small", 1)
    assert (record.state, record.driver_id) == (InstanceState.CREATING, "")
    provisioning.reconcile()
    assert record.driver_id == "i-1"
    clock.now += 600 + 900 + 1
    provisioning.sweep({})
    assert driver.deleted == ["i-1"]
    assert record.state is InstanceState.DELETED


def test_a_lost_create_answer_still_counts_against_max_nodes() -> None:
    clock, driver = Clock(), ScriptedProvisioner()
    driver.lose_answers = True
    provisioning = loop(clock, driver, **{"max-nodes": 1})
    provisioning.create("small", 1)
    driver.lose_answers = False
    provisioning.scale_up([job(1)])
    assert len(driver.launches) == 1


def test_a_lost_create_answer_registers_and_is_deleted_by_the_id_found() -> None:
    clock, driver = Clock(), ScriptedProvisioner()
    driver.lose_answers = True
    provisioning = loop(clock, driver)
    (record,) = provisioning.create("small", 1)
    boot(provisioning, driver)
    assert record.state is InstanceState.CREATED
    provisioning.delete(record.id)  # found by its name, though the reconcile never ran
    assert driver.deleted == ["i-1"]
    assert record.state is InstanceState.DELETED


def test_a_lost_answer_with_no_instance_of_its_name_is_deleted_without_a_driver_delete() -> None:
    clock, driver = Clock(), ScriptedProvisioner()
    driver.lose_answers = True
    provisioning = loop(clock, driver)
    (record,) = provisioning.create("small", 1)
    driver.existing.clear()  # the cloud never started it after all
    clock.now += 600 + 900 + 1
    provisioning.sweep({})
    assert driver.deleted == []
    assert record.state is InstanceState.DELETED
    assert "no instance of its name" in record.history[-1][2]


def test_a_lost_answer_is_not_marked_deleted_while_its_driver_cannot_list() -> None:
    clock, driver = Clock(), ScriptedProvisioner()
    driver.lose_answers = True
    provisioning = loop(clock, driver)
    (record,) = provisioning.create("small", 1)
    listing = driver.list_instances
    driver.list_instances = lambda: (_ for _ in ()).throw(Unavailable("api down"))
    clock.now += 600 + 900 + 1
    provisioning.sweep({})
    assert record.state is InstanceState.DELETING
    driver.list_instances = listing
    provisioning.sweep({})
    assert driver.deleted == ["i-1"]
    assert record.state is InstanceState.DELETED


def test_an_error_instance_the_driver_made_is_deleted_at_the_next_sweep() -> None:
    clock, driver = Clock(), ScriptedProvisioner()
    provisioning = loop(clock, driver)
    original = driver.create

    def failing(*args: Any, **kwargs: Any) -> Any:
        made = original(*args, **kwargs)
        return [replace(i, state=InstanceState.ERROR, detail="it failed to boot") for i in made]

    driver.create = failing  # type: ignore[method-assign]
    (record,) = provisioning.create("small", 1)
    assert (record.state, record.detail) == (InstanceState.ERROR, "it failed to boot")
    provisioning.sweep({})
    assert driver.deleted == ["i-1"]
    assert "it failed to boot" in record.detail


def test_a_parameter_the_infrastructure_refuses_is_the_callers_error_and_frees_the_room() -> None:
    clock, driver = Clock(), ScriptedProvisioner()
    driver.create = lambda *a, **k: (_ for _ in ()).throw(  # type: ignore[method-assign]
        InvalidArgument("scripted: RunInstances: InvalidSubnetID.NotFound")
    )
    provisioning = loop(clock, driver, **{"max-nodes": 1})
    with pytest.raises(InvalidArgument, match="InvalidSubnetID"):
        provisioning.create("small", 1)
    (record,) = provisioning.records()
    assert (record.state, record.detail) == (
        InstanceState.ERROR,
        "scripted: RunInstances: InvalidSubnetID.NotFound",
    )
    assert provisioning.scale_up([job(1)]) == []  # asked again (room was free): refused
    assert len(provisioning.records()) == 2
