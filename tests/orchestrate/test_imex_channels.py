"""``NVIDIA_IMEX_CHANNELS`` in a job's env requests IMEX channels: one
``nvidia.com/imex-channel`` per id it lists, counted like any device; a value that lists no
ids is refused at submission."""

import pytest

from fuzzball_core.errors import InvalidArgument
from fuzzball_core.spec.models import Job
from fuzzball_core.spec.resources import job_resources

JOB = """
version: v4
jobs:
  train:
    image: {{uri: docker://alpine:latest}}
    command: [/bin/true]
    env: ["NVIDIA_IMEX_CHANNELS={channels}"]
"""


def job(**fields) -> Job:
    return Job.model_validate({"image": {"uri": "docker://alpine:latest"}, **fields})


def test_each_channel_id_requests_one_imex_channel() -> None:
    resources = job_resources(job(env=["NVIDIA_IMEX_CHANNELS=0,1"]))
    assert dict(resources.devices) == {"nvidia.com/imex-channel": 2}


def test_resource_devices_counting_channels_themselves_win() -> None:
    resources = job_resources(
        job(env=["NVIDIA_IMEX_CHANNELS=0"], resource={"devices": {"nvidia.com/imex-channel": 3}})
    )
    assert dict(resources.devices) == {"nvidia.com/imex-channel": 3}


def test_a_job_asking_for_channels_waits_for_a_node_that_has_them(harness) -> None:
    harness.node("plain")
    imex = harness.node("imex", **{"nvidia.com/imex-channel": 1})

    harness.submit(JOB.format(channels="0"))

    (assignment,) = harness.assignments()
    assert list(assignment.node_ids) == [imex]


@pytest.mark.parametrize("value", ["all", "", "0,x"])
def test_channels_not_given_by_id_are_refused_at_submission(harness, value: str) -> None:
    harness.node("imex", **{"nvidia.com/imex-channel": 1})
    with pytest.raises(InvalidArgument) as refused:
        harness.submit(JOB.format(channels=value))
    assert "jobs.train.env: NVIDIA_IMEX_CHANNELS must list IMEX channel ids" in str(
        refused.value.message
    )
