"""The forms real Fuzzball v4 files use: each read as Fuzzball reads it."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from fuzzball_core.orchestrate.requests import job_payload
from fuzzball_core.spec import ParsedWorkflow, plan_workflow
from fuzzball_core.spec.models import Mount

Parse = Callable[[str], ParsedWorkflow]
Violations = Callable[[str], list[tuple[str, str]]]

VOLUMES = "volumes:\n  data: {reference: volume://user/ephemeral}\n"


def workflow(job: str = "", *, head: str = VOLUMES, services: str = "") -> str:
    """A v4 workflow whose job ``a`` has the extra fields ``job`` (4-space indent)."""
    text = f"version: v4\n{head}jobs:\n  a:\n    image: {{uri: docker://alpine:3.19}}\n"
    text += "    command: ['true']\n" + job
    if services:
        text += "services:\n  s:\n    image: {uri: docker://alpine:3.19}\n"
        text += "    command: [sleep, infinity]\n" + services
    return text


# --- mounts ---------------------------------------------------------------------------------


def test_a_mount_given_as_the_volume_name_alone_mounts_that_volume(parse: Parse) -> None:
    parsed = parse(workflow("    mounts: {/data: data}\n"))
    assert parsed.jobs["a"].mounts == {"/data": Mount(volume="data")}


def test_short_and_long_mount_forms_mix_in_one_step(parse: Parse) -> None:
    head = VOLUMES + "  more: {reference: volume://user/ephemeral}\n"
    parsed = parse(workflow("    mounts: {/data: data, /more: {volume: more}}\n", head=head))
    assert parsed.jobs["a"].mounts == {"/data": Mount(volume="data"), "/more": Mount(volume="more")}


def test_a_short_mount_of_an_undeclared_volume_names_the_mount_as_written(
    violations: Violations,
) -> None:
    found = violations(workflow("    mounts: {/data: ghost}\n"))
    assert found == [("jobs.a.mounts./data", "volume ghost is not declared in volumes")]


def test_short_mounts_in_defaults_reach_every_job(parse: Parse) -> None:
    head = VOLUMES + "defaults:\n  job:\n    mounts: {/data: data}\n"
    assert parse(workflow(head=head)).jobs["a"].mounts == {"/data": Mount(volume="data")}


def test_a_short_mount_waits_for_its_volume_like_a_long_one(parse: Parse) -> None:
    plan = plan_workflow(parse(workflow("    mounts: {/data: data}\n")))
    assert {edge.source for edge in plan.dependencies_of("jobs.a")} >= {"volumes.data"}


# --- files ----------------------------------------------------------------------------------


def test_a_job_receives_inline_file_content_and_named_files_alike(parse: Parse) -> None:
    text = workflow(
        "    files: {/etc/named.conf: file://conf, /etc/inline.conf: 'y=2'}\n",
        head="files:\n  conf: 'x=1'\n",
    )
    parsed = parse(text)
    payload = json.loads(job_payload(parsed.jobs["a"], parsed.model.files))
    assert payload["files"] == {"/etc/named.conf": "x=1", "/etc/inline.conf": "y=2"}


# --- the API's spellings ---------------------------------------------------------------------


def test_fields_spelled_as_fuzzballs_api_spells_them_are_read(parse: Parse) -> None:
    text = workflow(
        "    resource: {memory: {size: 1GiB, byCore: true}}\n"
        "    multinode: {nodes: 2, procsPerNode: 4}\n"
        "    network: {isolated: true, exposeTcp: [8080], exposeUdp: [53]}\n"
        "    image: {uri: docker://alpine:3.19, decryptionSecret: secret://user/key}\n"
    ).replace("    image: {uri: docker://alpine:3.19}\n", "", 1)
    job = parse(text).jobs["a"]
    assert job.resource is not None and job.resource.memory is not None
    assert job.resource.memory.by_core is True
    assert job.multinode is not None and job.multinode.procs_per_node == 4
    assert job.network is not None and job.network.expose_tcp == [8080]
    assert job.network.expose_udp == [53]
    assert job.image.decryption_secret == "secret://user/key"


def test_an_error_in_a_field_spelled_as_the_api_spells_it_names_it_so(
    violations: Violations,
) -> None:
    found = violations(workflow("    multinode: {nodes: 2, procsPerNode: 0}\n"))
    assert [path for path, _ in found] == ["jobs.a.multinode.procsPerNode"]


def test_a_field_given_in_both_spellings_is_rejected(violations: Violations) -> None:
    found = violations(workflow("    multinode: {nodes: 2, procsPerNode: 2, procs-per-node: 2}\n"))
    assert found == [("jobs.a.multinode.procsPerNode", "is procs-per-node again; set it once")]


def test_a_transfer_spelled_as_the_api_spells_it_is_read(parse: Parse) -> None:
    head = (
        "volumes:\n  data:\n    reference: volume://user/ephemeral\n    ingress:\n"
        "      - source: {uri: 'https://example.org/a', decryptionSecret: secret://user/k}\n"
        "        destination: {uri: 'file://a'}\n"
    )
    volume = (parse(workflow(head=head)).model.volumes or {})["data"]
    assert volume.ingress is not None
    assert volume.ingress[0].source.decryption_secret == "secret://user/k"


# --- defaults -------------------------------------------------------------------------------

DEFAULTS = """\
defaults:
  env: [LEVEL=defaults, COMMON=1]
  resource: {cpu: {cores: 2}}
  job:
    env: [LEVEL=job]
  service:
    env: [LEVEL=service]
    resource: {memory: {size: 1GiB}}
"""


def test_defaults_of_its_own_reach_jobs_under_defaults_job(parse: Parse) -> None:
    job = parse(workflow(head=DEFAULTS)).jobs["a"]
    assert job.env == ["COMMON=1", "LEVEL=job"]
    assert job.resource is not None and job.resource.cpu is not None
    assert job.resource.cpu.cores == 2


def test_defaults_service_reaches_services_and_wins_over_the_other_levels(parse: Parse) -> None:
    service = parse(workflow(head=DEFAULTS, services="    env: [OWN=1]\n")).services["s"]
    assert service.env == ["COMMON=1", "LEVEL=service", "OWN=1"]
    assert service.resource is not None and service.resource.memory is not None
    assert service.resource.memory.size == "1GiB"
    assert service.resource.cpu is not None and service.resource.cpu.cores == 2


def test_defaults_service_does_not_reach_jobs(parse: Parse) -> None:
    job = parse(workflow(head=DEFAULTS)).jobs["a"]
    assert job.resource is not None and job.resource.memory is None


# --- policy ---------------------------------------------------------------------------------


def test_restart_never_retries_nothing_and_says_nothing(parse: Parse) -> None:
    parsed = parse(workflow("    policy: {restart: never}\n"))
    policy = parsed.jobs["a"].policy
    assert policy is not None and policy.effective_retry is None
    assert parsed.warnings == []


# --- volumes --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "volume",
    [
        "{use: ephemeral}",
        "{use: persistent, name: project-data}",
        "{use: shared-nfs, size: 50GB}",
        "{size: 10GB, annotations: {tier: fast}}",
        "{name: my-dataset}",
    ],
)
def test_volumes_in_fuzzball_v4_provisioner_syntax_are_read(parse: Parse, volume: str) -> None:
    parsed = parse(workflow(head=f"volumes:\n  data: {volume}\n"))
    assert "data" in (parsed.model.volumes or {})


def test_a_volume_saying_nothing_of_its_kind_is_rejected(violations: Violations) -> None:
    found = violations(workflow(head="volumes:\n  data: {ingress: []}\n"))
    assert [path for path, _ in found] == ["volumes.data"]


# --- warnings given only for the values that ask for something else ---------------------------


def test_preemptible_false_is_what_happens_here_and_is_not_warned_about(parse: Parse) -> None:
    assert parse(workflow("    preemptible: false\n")).warnings == []


def test_preemptible_true_is_warned_about_whatever_its_spelling(parse: Parse) -> None:
    warnings = parse(workflow("    preemptible: 'True'\n")).warnings
    assert warnings == ["jobs.a.preemptible: has no effect here; this cluster never preempts work"]


def test_a_job_name_equal_to_its_key_is_not_warned_about(parse: Parse) -> None:
    assert parse(workflow("    name: a\n")).warnings == []


def test_persist_false_is_what_happens_here_and_is_not_warned_about(parse: Parse) -> None:
    assert parse(workflow(services="    persist: false\n")).warnings == []


def test_a_v1_file_is_warned_about_at_the_paths_it_wrote(parse: Parse) -> None:
    text = (
        "version: v1\njobs:\n  a:\n    image: {uri: docker://alpine:3.19}\n"
        "    command: ['true']\n    name: other\n"
    )
    assert parse(text).warnings == ["jobs.a.name: ignored; the key names it"]
