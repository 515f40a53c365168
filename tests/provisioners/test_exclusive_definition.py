"""A provisioner definition's ``exclusive``: its nodes run one job at a time. The loop marks
the node (``fuzzball.io/exclusive``) when it registers; the default scheduler places nothing
beside a job running on such a node, however little that job asks for."""

from __future__ import annotations

from support.scripted_provisioner import ScriptedProvisioner

from fuzzball_core.config import ProvisionerConfig
from fuzzball_core.drivers import NodeBootstrap
from fuzzball_core.orchestrate.provisioning import Provisioning
from fuzzball_core.scheduling import EXCLUSIVE_NODE, JobRequest, NodeInfo, Resources
from fuzzball_plugins.schedulers.default import DefaultScheduler

GIB = 1024**3


def registered_annotations(*, exclusive: bool) -> dict[str, str]:
    """The annotations a node of a definition gets when its Substrate registers."""
    config = ProvisionerConfig.model_validate(
        {
            "definitions": [
                {
                    "id": "solo",
                    "driver": "scripted",
                    "cores": 8,
                    "memory": 16 * GIB,
                    "exclusive": exclusive,
                }
            ]
        }
    )
    driver = ScriptedProvisioner()
    provisioning = Provisioning(config, {"scripted": driver}, node_address="127.0.0.1:1")
    provisioning.scale_up([JobRequest("run-1", Resources(1, GIB))])
    bootstrap = NodeBootstrap.parse(driver.launches[0].user_data)
    return provisioning.register(bootstrap.node_name, bootstrap.registration_token, {})


def scheduler_with(annotations: dict[str, str]) -> DefaultScheduler:
    scheduler = DefaultScheduler()
    scheduler.upsert_node(NodeInfo("node-1", Resources(8, 16 * GIB), annotations=annotations))
    return scheduler


def small(n: int) -> JobRequest:
    return JobRequest(f"job-{n}", Resources(1, GIB), submitted_at=float(n))


def test_an_exclusive_definitions_node_is_annotated_to_run_one_job_at_a_time() -> None:
    assert registered_annotations(exclusive=True)[EXCLUSIVE_NODE] == "true"


def test_a_shared_definitions_node_carries_no_exclusive_annotation() -> None:
    assert EXCLUSIVE_NODE not in registered_annotations(exclusive=False)


def test_an_exclusive_node_takes_one_of_two_small_jobs_that_would_both_fit() -> None:
    scheduler = scheduler_with(registered_annotations(exclusive=True))
    result = scheduler.schedule([small(1), small(2)], now=0.0)
    assert [placement.job_id for placement in result.placements] == ["job-1"]
    assert result.diagnoses["job-2"].groups == {"running an exclusive job": 1}


def test_an_exclusive_node_takes_the_next_job_once_the_first_ends() -> None:
    scheduler = scheduler_with(registered_annotations(exclusive=True))
    scheduler.schedule([small(1), small(2)], now=0.0)
    scheduler.release("job-1")
    result = scheduler.schedule([small(2)], now=1.0)
    assert [placement.job_id for placement in result.placements] == ["job-2"]


def test_a_job_reconciled_onto_an_exclusive_node_keeps_others_off_it() -> None:
    scheduler = scheduler_with({EXCLUSIVE_NODE: "true"})
    scheduler.allocate(small(1), ["node-1"])
    result = scheduler.schedule([small(2)], now=0.0)
    assert result.placements == ()


def test_a_shared_node_takes_both_small_jobs() -> None:
    scheduler = scheduler_with(registered_annotations(exclusive=False))
    result = scheduler.schedule([small(1), small(2)], now=0.0)
    assert sorted(placement.job_id for placement in result.placements) == ["job-1", "job-2"]
