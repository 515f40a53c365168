"""The scheduling data types: validation with field names, normal forms and people's words."""

import pytest

from fuzzball_core.errors import InvalidArgument
from fuzzball_core.scheduling import (
    Hold,
    HoldEffect,
    HoldSource,
    JobRequest,
    NodeInfo,
    Resources,
    format_bytes,
)

GiB = 1 << 30


def test_resources_drop_zero_device_counts():
    assert Resources(1, 0, {"nvidia.com/gpu": 0}) == Resources(1, 0)
    assert hash(Resources(1, 2, {"a": 1})) == hash(Resources(1, 2, {"a": 1}))


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"cores": -1}, "cores"),
        ({"memory": 1.5}, "memory"),
        ({"cores": True}, "cores"),
        ({"devices": {"gpu": -2}}, "devices\\['gpu'\\]"),
    ],
)
def test_resources_refuse_bad_amounts_naming_the_field(kwargs, field):
    with pytest.raises(InvalidArgument, match=field):
        Resources(**kwargs)


def test_resources_describe_themselves():
    assert Resources(1, 512 * 1024**2, {"nvidia.com/gpu": 2}).describe() == (
        "1 core, 512 MiB memory, 2 nvidia.com/gpu"
    )


@pytest.mark.parametrize(
    ("size", "text"),
    [(512, "512 B"), (1536, "1.5 KiB"), (64 * GiB, "64 GiB"), (3 * 1024 * GiB, "3 TiB")],
)
def test_byte_counts_read_in_binary_units(size, text):
    assert format_bytes(size) == text


def test_hold_accepts_effect_and_source_as_words():
    hold = Hold("evict", "monitoring", "ECC")
    assert (hold.effect, hold.source) == (HoldEffect.EVICT, HoldSource.MONITORING)
    assert hold.label == "evict by monitoring"


@pytest.mark.parametrize(("effect", "source"), [("drain", "admin"), ("cordon", "user")])
def test_hold_refuses_unknown_effects_and_sources(effect, source):
    with pytest.raises(InvalidArgument, match="must be one of"):
        Hold(effect, source)


def test_node_takes_new_work_only_when_ready_and_unheld():
    capacity = Resources(1, GiB)
    assert NodeInfo("n", capacity).takes_new_work
    assert not NodeInfo("n", capacity, ready=False).takes_new_work
    assert not NodeInfo("n", capacity, holds=(Hold("cordon", "admin"),)).takes_new_work


def test_node_annotations_must_be_strings():
    with pytest.raises(InvalidArgument, match="node n: annotations"):
        NodeInfo("n", Resources(1, GiB), annotations={"zone": 1})


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"nodes": 0}, "nodes"),
        ({"priority": "high"}, "priority"),
        ({"expected_runtime": -5}, "expected_runtime"),
        ({"expected_runtime": float("inf")}, "expected_runtime"),
    ],
)
def test_job_request_refuses_bad_fields_naming_job_and_field(kwargs, field):
    with pytest.raises(InvalidArgument, match=f"job j: {field}"):
        JobRequest("j", Resources(1, GiB), **kwargs)


def test_jobs_with_equal_placement_needs_share_a_shape():
    first = JobRequest("a", Resources(2, GiB), annotations={"x": "1", "y": "2"}, priority=1)
    second = JobRequest("b", Resources(2, GiB), annotations={"y": "2", "x": "1"}, submitted_at=9)
    assert first.shape == second.shape


def test_jobs_without_host_ports_share_one_empty_set():
    # a set per job is one more object for every full collection of the cyclic collector
    first = JobRequest("a", Resources(1, GiB))
    second = JobRequest("b", Resources(1, GiB), host_ports=[])
    ported = JobRequest("c", Resources(1, GiB), host_ports=["tcp/8080"])
    assert first.host_ports == second.host_ports == frozenset()
    assert first.host_ports is second.host_ports
    assert ported.host_ports == {"tcp/8080"}


def test_queue_order_is_priority_then_submission_then_id():
    jobs = [
        JobRequest("c", Resources(), submitted_at=1),
        JobRequest("b", Resources(), submitted_at=1),
        JobRequest("a", Resources(), submitted_at=2, priority=1),
    ]
    assert [job.id for job in sorted(jobs, key=lambda j: j.order_key)] == ["a", "b", "c"]


def test_job_request_describes_itself():
    job = JobRequest("j", Resources(16, 64 * GiB), nodes=2, exclusive=True, annotations={"z": "a"})
    assert job.describe() == (
        "2 nodes with 16 cores, 64 GiB memory each (exclusive nodes), on nodes annotated z=a"
    )
