"""A provisioner definition's ``ttl-buffer``: a job whose timeout would run past its node's
ttl less the buffer is not placed there. The loop gives the node that time
(``fuzzball.io/place-until``) when it registers; the default scheduler places only jobs that
end by then, and says why the others wait."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError
from support.scripted_provisioner import ScriptedProvisioner

from fuzzball_core.config import ProvisionerConfig
from fuzzball_core.drivers import NodeBootstrap
from fuzzball_core.orchestrate.provisioning import Provisioning
from fuzzball_core.scheduling import PLACE_UNTIL, JobRequest, NodeInfo, Resources
from fuzzball_plugins.schedulers.default import DefaultScheduler

GIB = 1024**3
REQUESTED_AT = 1_000_000.0


def registered_annotations(**definition: Any) -> dict[str, str]:
    """The annotations a node of the definition gets when its Substrate registers."""
    settings = {"id": "short", "driver": "scripted", "cores": 8, "memory": 16 * GIB}
    settings.update(definition)
    config = ProvisionerConfig.model_validate({"definitions": [settings]})
    driver = ScriptedProvisioner()
    provisioning = Provisioning(
        config, {"scripted": driver}, node_address="127.0.0.1:1", clock=lambda: REQUESTED_AT
    )
    provisioning.scale_up([JobRequest("run-1", Resources(1, GIB), expected_runtime=60)])
    bootstrap = NodeBootstrap.parse(driver.launches[0].user_data)
    return provisioning.register(bootstrap.node_name, bootstrap.registration_token, {})


def scheduler_with(annotations: dict[str, str]) -> DefaultScheduler:
    scheduler = DefaultScheduler()
    scheduler.upsert_node(NodeInfo("node-1", Resources(8, 16 * GIB), annotations=annotations))
    return scheduler


def timed(name: str, runtime: float | None) -> JobRequest:
    return JobRequest(name, Resources(1, GIB), expected_runtime=runtime)


def test_a_node_of_a_definition_with_ttl_and_buffer_is_free_by_ttl_less_buffer() -> None:
    annotations = registered_annotations(ttl=3600, **{"ttl-buffer": 600})
    assert annotations[PLACE_UNTIL] == f"{REQUESTED_AT + 3000:.0f}"


def test_a_node_of_a_definition_without_ttl_carries_no_bound() -> None:
    assert PLACE_UNTIL not in registered_annotations()


def test_a_buffer_without_a_ttl_is_refused_rather_than_ignored() -> None:
    with pytest.raises(ValidationError, match="ttl-buffer needs a ttl"):
        registered_annotations(**{"ttl-buffer": 600})


def test_a_job_ending_before_the_bound_is_placed() -> None:
    scheduler = scheduler_with({PLACE_UNTIL: "10000"})
    result = scheduler.schedule([timed("short", 3000)], now=7000.0)
    assert [placement.job_id for placement in result.placements] == ["short"]


def test_a_job_whose_timeout_runs_past_the_bound_waits_and_says_why() -> None:
    scheduler = scheduler_with({PLACE_UNTIL: "10000"})
    result = scheduler.schedule([timed("long", 3001)], now=7000.0)
    assert result.placements == ()
    diagnosis = result.diagnoses["long"]
    assert diagnosis.groups == {"job's timeout runs past the node's ttl less its buffer": 1}
    assert "timeout runs past the node's ttl less its buffer" in diagnosis.message


def test_a_job_with_no_known_end_is_kept_off_a_bounded_node() -> None:
    scheduler = scheduler_with({PLACE_UNTIL: "10000"})
    assert scheduler.schedule([timed("endless", None)], now=0.0).placements == ()


def test_a_job_that_fit_earlier_no_longer_fits_as_the_bound_nears() -> None:
    scheduler = scheduler_with({PLACE_UNTIL: "10000"})
    assert scheduler.schedule([timed("early", 3000)], now=9000.0).placements == ()


def test_an_unbounded_node_takes_a_job_with_no_known_end() -> None:
    scheduler = scheduler_with({})
    result = scheduler.schedule([timed("endless", None)], now=0.0)
    assert [placement.job_id for placement in result.placements] == ["endless"]
