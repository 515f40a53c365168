"""Scale up around ttl-bound definitions: a job whose timeout a definition's nodes could
never fit before their ttl less ``ttl-buffer`` gets a node of another definition, and a job
kept off the ttl-bound node that was started for it (it registered with too little of its
ttl left) gets a node that can hold it instead of waiting forever."""

from __future__ import annotations

from typing import Any

from support.scripted_provisioner import ScriptedProvisioner

from fuzzball_core.config import ProvisionerConfig
from fuzzball_core.drivers import NodeBootstrap
from fuzzball_core.orchestrate.provisioning import Provisioning
from fuzzball_core.scheduling import JobRequest, NodeInfo, Resources
from fuzzball_plugins.schedulers.default import DefaultScheduler

GIB = 1024**3
START = 1_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


#: cheap nodes that live an hour and take work for 3,000 s of it
SHORT = {
    "id": "short",
    "driver": "scripted",
    "cores": 8,
    "memory": 16 * GIB,
    "ttl": 3600,
    "ttl-buffer": 600,
    "cost-per-hour-estimate": 1.0,
    "max-nodes": 4,
}
#: dearer nodes with no ttl
LONG = {**SHORT, "id": "long", "cost-per-hour-estimate": 5.0}
del LONG["ttl"], LONG["ttl-buffer"]


def loop(*definitions: dict[str, Any]) -> tuple[Provisioning, ScriptedProvisioner, Clock]:
    driver = ScriptedProvisioner()
    clock = Clock()
    config = ProvisionerConfig.model_validate({"definitions": list(definitions)})
    provisioning = Provisioning(
        config, {"scripted": driver}, node_address="127.0.0.1:1", clock=clock
    )
    return provisioning, driver, clock


def job(runtime: float | None) -> JobRequest:
    return JobRequest("run-1", Resources(1, GIB), expected_runtime=runtime)


def requested_from(provisioning: Provisioning, waiting: JobRequest) -> list[str]:
    return [record.definition_id for record in provisioning.scale_up([waiting])]


def register_first(provisioning: Provisioning, driver: ScriptedProvisioner) -> dict[str, str]:
    """The first launched instance's node registers; the annotations it gets."""
    bootstrap = NodeBootstrap.parse(driver.launches[0].user_data)
    return provisioning.register(bootstrap.node_name, bootstrap.registration_token, {})


def test_a_job_ending_within_ttl_less_buffer_gets_the_cheaper_ttl_bound_definition():
    provisioning, _, _ = loop(SHORT, LONG)
    assert requested_from(provisioning, job(3000)) == ["short"]


def test_a_job_whose_timeout_runs_past_ttl_less_buffer_gets_a_definition_without_ttl():
    provisioning, _, _ = loop(SHORT, LONG)
    assert requested_from(provisioning, job(3001)) == ["long"]


def test_a_job_with_no_timeout_gets_a_definition_without_ttl():
    provisioning, _, _ = loop(SHORT, LONG)
    assert requested_from(provisioning, job(None)) == ["long"]


def test_a_job_only_a_ttl_bound_definition_could_shape_is_refused_naming_the_window():
    provisioning, _, _ = loop(SHORT)
    refusal = provisioning.refusal(job(7200))
    assert refusal is not None
    assert (
        "short: 7200s timeout asked, its nodes take only jobs that end within their ttl less"
        " ttl-buffer (3000s)"
    ) in refusal


def test_a_long_job_kept_off_its_late_ttl_bound_node_gets_a_node_that_can_hold_it():
    provisioning, driver, clock = loop(SHORT, LONG)
    waiting = job(2900)
    assert requested_from(provisioning, waiting) == ["short"]
    clock.now += 200  # the node took 200 s to come up: 2,800 s of its window are left
    annotations = register_first(provisioning, driver)
    scheduler = DefaultScheduler()
    scheduler.upsert_node(NodeInfo("short-node", Resources(8, 16 * GIB), annotations=annotations))
    kept_off = scheduler.schedule([waiting], now=clock.now)
    assert kept_off.placements == ()
    assert requested_from(provisioning, waiting) == ["long"]


def test_a_job_its_registered_ttl_bound_node_can_still_hold_asks_for_no_other():
    provisioning, driver, clock = loop(SHORT, LONG)
    waiting = job(2000)
    provisioning.scale_up([waiting])
    clock.now += 200
    register_first(provisioning, driver)
    assert requested_from(provisioning, waiting) == []


def test_a_job_kept_off_its_late_node_asks_no_other_of_the_same_definition():
    provisioning, driver, clock = loop(SHORT)
    waiting = job(2900)
    provisioning.scale_up([waiting])
    clock.now += 200
    register_first(provisioning, driver)
    # a fresh node of "short" would come up as late: the job waits for one that can hold it
    assert requested_from(provisioning, waiting) == []
    assert len(driver.launches) == 1
