"""Volume transfers in the engine: ingress travels with the assignments of the jobs that
mount the volume; what this cluster cannot carry out is refused at submission."""

import json

import pytest

from fuzzball_core.errors import InvalidArgument


def workflow(volume: str, *, mounted: bool = True) -> str:
    mounts = "    mounts: {/data: {volume: data}}\n" if mounted else ""
    return (
        "version: v4\nvolumes:\n  data:\n    reference: volume://user/ephemeral\n"
        + volume
        + "jobs:\n  run:\n    image: {uri: docker://alpine:latest}\n    command: [ls, /data]\n"
        + mounts
    )


INGRESS = """    ingress:
      - source: {uri: "https://example.org/in.lj.txt"}
        destination: {uri: "file://inputs/in.lj.txt"}
"""


def _refusal(harness, text: str) -> list[tuple[str, str]]:
    harness.node()
    with pytest.raises(InvalidArgument) as refused:
        harness.submit(text)
    return [(d["field"], d["description"]) for d in refused.value.details]


def test_a_job_mounting_a_volume_with_ingress_carries_it(harness) -> None:
    harness.node()
    harness.submit(workflow(INGRESS))
    (assignment,) = harness.assignments()
    assert json.loads(assignment.volume_ingress_json) == {
        "data": [{"source": "https://example.org/in.lj.txt", "destination": "inputs/in.lj.txt"}]
    }


def test_a_job_not_mounting_the_volume_carries_no_ingress(harness) -> None:
    harness.node()
    harness.submit(workflow(INGRESS, mounted=False))
    (assignment,) = harness.assignments()
    assert assignment.volume_ingress_json == ""


def test_egress_to_anything_but_an_s3_object_is_refused_naming_the_destination(harness) -> None:
    egress = """    egress:
      - source: {uri: "file://out/result.txt"}
        destination: {uri: "https://example.org/result.txt"}
"""
    found = _refusal(harness, workflow(egress))
    assert found == [
        (
            "volumes.data.egress[0].destination.uri",
            "must be s3://BUCKET/KEY: only S3 objects are sent to",
        )
    ]


def test_sources_other_than_http_and_s3_are_refused(harness) -> None:
    found = _refusal(harness, workflow(INGRESS.replace("https://example.org", "ftp://host")))
    assert found == [
        (
            "volumes.data.ingress[0].source.uri",
            "only http://, https:// and s3:// sources can be fetched here yet",
        )
    ]


def test_an_s3_source_with_its_secret_and_retries_is_assigned_with_the_reference_only(
    harness,
) -> None:
    s3 = INGRESS.replace(
        'uri: "https://example.org/in.lj.txt"}',
        'uri: "s3://inputs/runs/in.lj.txt", secret: "secret://user/s3"}\n'
        "        policy: {retry: {attempts: 2}}",
    )
    harness.node()
    harness.submit(workflow(s3))
    (assignment,) = harness.assignments()
    assert json.loads(assignment.volume_ingress_json) == {
        "data": [
            {
                "source": "s3://inputs/runs/in.lj.txt",
                "destination": "inputs/in.lj.txt",
                "secret": "secret://user/s3",
                "retries": 2,
            }
        ]
    }


def test_an_s3_source_naming_no_object_is_refused(harness) -> None:
    found = _refusal(
        harness, workflow(INGRESS.replace("https://example.org/in.lj.txt", "s3://inputs"))
    )
    assert found == [
        ("volumes.data.ingress[0].source.uri", "must be s3://BUCKET/KEY, naming one object")
    ]


def test_a_source_with_a_secret_is_assigned_with_the_reference_only(harness) -> None:
    with_secret = INGRESS.replace(
        'uri: "https://example.org/in.lj.txt"}',
        'uri: "https://example.org/in.lj.txt", secret: "secret://user/s"}',
    )
    harness.node()
    harness.submit(workflow(with_secret))
    (assignment,) = harness.assignments()
    (transfer,) = json.loads(assignment.volume_ingress_json)["data"]
    assert transfer["secret"] == "secret://user/s"


def test_sources_needing_a_decryption_secret_are_refused(harness) -> None:
    with_secret = INGRESS.replace(
        'uri: "https://example.org/in.lj.txt"}',
        'uri: "https://example.org/in.lj.txt", decryption-secret: "secret://user/s"}',
    )
    found = _refusal(harness, workflow(with_secret))
    assert [field for field, _ in found] == ["volumes.data.ingress[0].source.decryption-secret"]


def test_destinations_must_be_files_in_the_volume(harness) -> None:
    found = _refusal(harness, workflow(INGRESS.replace("file://inputs/in.lj.txt", "/tmp/x")))
    assert [field for field, _ in found] == ["volumes.data.ingress[0].destination.uri"]
