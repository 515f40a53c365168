"""Submission of Fuzzball v4 files: their forms reach the node, and what this cluster cannot
do is refused naming the field (docs/fields.md)."""

from __future__ import annotations

import json

import pytest

from fuzzball_core.errors import InvalidArgument


def workflow(volume: str = "{reference: volume://user/ephemeral}", service: str = "") -> str:
    text = (
        f"version: v4\nfiles:\n  conf: 'x=1'\nvolumes:\n  data: {volume}\n"
        "jobs:\n  run:\n    image: {uri: docker://alpine:latest}\n    command: [ls, /data]\n"
        "    mounts: {/data: data}\n"
        "    files: {/etc/named.conf: file://conf, /etc/inline.conf: 'y=2'}\n"
    )
    if service:
        text += "services:\n  web:\n    image: {uri: docker://alpine:latest}\n"
        text += f"    command: [sleep, infinity]\n{service}"
    return text


def refusal(harness, text: str) -> list[tuple[str, str]]:
    harness.node()
    with pytest.raises(InvalidArgument) as refused:
        harness.submit(text)
    return [(d["field"], d["description"]) for d in refused.value.details]


def test_a_v4_job_reaches_its_node_with_short_mounts_and_inline_files(harness) -> None:
    harness.node()
    harness.submit(workflow())
    (assignment,) = harness.assignments()
    job = json.loads(assignment.job_json)
    assert job["mounts"] == {"/data": {"volume": "data"}}
    assert job["files"] == {"/etc/named.conf": "x=1", "/etc/inline.conf": "y=2"}


@pytest.mark.parametrize(
    ("volume", "reference"),
    [
        ("{reference: volume://user/persistent/results}", ("persistent", "results")),
        ("{reference: volume://group/persistent}", ("persistent", "default")),
        ("{use: persistent, name: results}", ("persistent", "results")),
        ("{name: results}", ("persistent", "results")),
    ],
)
def test_persistent_volumes_in_every_syntax_reach_the_node_as_their_volume(
    harness, volume, reference
) -> None:
    harness.node()
    harness.submit(workflow(volume))
    (assignment,) = harness.assignments()
    location = json.loads(assignment.volumes_json)["data"]
    assert (location["storageClass"], location["name"]) == reference
    assert location["volumeId"]


def test_a_volume_reference_to_an_unknown_storage_class_is_refused_naming_it(harness) -> None:
    harness.node()
    with pytest.raises(InvalidArgument, match=r"volumes\.data: no storage class 'scratch-cache'"):
        harness.submit(workflow("{reference: volume://user/scratch-cache}"))


def test_a_storage_provisioner_is_refused_naming_use(harness) -> None:
    found = refusal(harness, workflow("{use: shared-nfs, size: 50GB}"))
    assert found == [
        ("volumes.data.use", "storage provisioners are not supported here; use: ephemeral")
    ]


def test_a_host_volume_is_refused_naming_its_type(harness) -> None:
    found = refusal(harness, workflow("{type: HOST}"))
    assert found == [
        (
            "volumes.data.type",
            "host volumes are not supported here; use a storage class of the hostpath driver"
            " (volume://user/CLASS/NAME)",
        )
    ]


def test_ephemeral_volumes_in_either_syntax_are_accepted(harness) -> None:
    harness.node()
    for volume in ("{use: ephemeral, size: 1GiB}", "{type: EPHEMERAL}", "{size: 1GiB}"):
        harness.submit(workflow(volume))
    assert len(harness.assignments()) == 3


def test_a_service_on_the_host_network_is_accepted(harness) -> None:
    harness.node()
    harness.submit(workflow(service="    network: {host: true}\n"))
    assert len(harness.assignments()) == 2


def test_a_service_asking_for_a_network_of_its_own_is_refused_naming_host(harness) -> None:
    found = refusal(harness, workflow(service="    network: {host: false}\n"))
    assert [field for field, _ in found] == ["services.web.network.host"]


def test_an_autoscaled_service_is_refused_naming_autoscaler(harness) -> None:
    found = refusal(harness, workflow(service="    autoscaler: {replicas: {min: 0, max: 2}}\n"))
    assert found == [
        ("services.web.autoscaler", "autoscaling is not supported here yet (one instance)")
    ]


def test_an_encrypted_image_is_refused_naming_its_decryption_secret(harness) -> None:
    text = workflow().replace(
        "image: {uri: docker://alpine:latest}",
        "image: {uri: docker://alpine:latest, decryption-secret: secret://user/key}",
    )
    found = refusal(harness, text)
    assert found == [
        ("jobs.run.image.decryption-secret", "encrypted images are not supported here yet")
    ]
