"""Each validation rule of the workflow specification, accepted and refused."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from fuzzball_core.errors import InvalidArgument
from fuzzball_core.spec import ParsedWorkflow, field_violations, parse_workflow
from fuzzball_core.spec.references import step_file_contents

Parse = Callable[[str], ParsedWorkflow]
Violations = Callable[[str], list[tuple[str, str]]]
Paths = Callable[[str], list[str]]


def one_job(body: str, *, head: str = "") -> str:
    """A v4 workflow with job ``a`` whose extra fields are ``body`` (YAML, 4-space indent)."""
    return (
        "version: v4\n" + head + "jobs:\n  a:\n    image:\n      uri: docker://alpine:3.19\n"
        "    command: [true]\n" + body
    )


# --- image URIs ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "uri",
    ["docker://alpine:3.19", "oras://ghcr.io/x/y.sif:1", "fuzzball://user/t.sif", "fb://group/t"],
)
def test_image_uris_with_a_supported_scheme_are_accepted(parse: Parse, uri: str) -> None:
    parsed = parse(f"version: v4\njobs:\n  a:\n    image: {{uri: '{uri}'}}\n")
    assert parsed.model.jobs["a"].image.uri == uri


@pytest.mark.parametrize("uri", ["https://example.com/x.sif", "shub://x/y", "library://a/b"])
def test_image_uris_with_other_schemes_are_rejected(violations: Violations, uri: str) -> None:
    found = violations(f"version: v4\njobs:\n  a:\n    image: {{uri: '{uri}'}}\n")
    assert [path for path, _ in found] == ["jobs.a.image.uri"]
    assert "docker://" in found[0][1]


def test_bare_image_references_are_rejected(violations: Violations) -> None:
    found = violations("version: v4\njobs:\n  a:\n    image: {uri: 'alpine:latest'}\n")
    assert found[0][0] == "jobs.a.image.uri"
    assert "bare" in found[0][1]


def test_image_uri_errors_do_not_repeat_the_uri(violations: Violations) -> None:
    found = violations("version: v4\njobs:\n  a:\n    image: {uri: 'https://u:hunter2@host/x'}\n")
    assert "hunter2" not in repr(found)


def test_built_images_must_start_from_a_supported_scheme(paths: Paths) -> None:
    text = one_job("", head="images:\n  t:\n    from: {uri: 'http://x/y'}\n")
    assert paths(text) == ["images.t.from.uri"]


# --- retry and restart ----------------------------------------------------------------------


def test_retry_on_node_and_exit_codes_is_accepted(parse: Parse) -> None:
    parsed = parse(one_job("    policy:\n      retry: {on: [node, 1, 75, 255], attempts: 3}\n"))
    retry = parsed.model.jobs["a"].policy.effective_retry
    assert retry.on == ["node", 1, 75, 255]
    assert retry.attempts == 3


@pytest.mark.parametrize("code", ["0", "256", "-1", "banana"])
def test_retry_on_codes_outside_1_to_255_are_rejected(violations: Violations, code: str) -> None:
    found = violations(one_job(f"    policy:\n      retry: {{on: [node, {code}]}}\n"))
    assert [path for path, _ in found] == ["jobs.a.policy.retry.on[1]"]


@pytest.mark.parametrize("code", ["130", "143"])
def test_retry_on_130_and_143_is_refused(violations: Violations, code: str) -> None:
    found = violations(one_job(f"    policy:\n      retry: {{on: [{code}]}}\n"))
    assert found[0][0] == "jobs.a.policy.retry.on[0]"
    assert "130 and 143" in found[0][1]


def test_retry_attempts_below_one_are_rejected(paths: Paths) -> None:
    text = one_job("    policy:\n      retry: {on: [node], attempts: 0}\n")
    assert paths(text) == ["jobs.a.policy.retry.attempts"]


def test_retry_without_on_retries_nothing_and_warns(parse: Parse) -> None:
    parsed = parse(one_job("    policy:\n      retry: {attempts: 3}\n"))
    assert parsed.model.jobs["a"].policy.effective_retry is None
    assert any(w.startswith("jobs.a.policy.retry.on:") for w in parsed.warnings)


def test_retry_and_restart_on_one_step_is_an_error(violations: Violations) -> None:
    found = violations(
        one_job("    policy:\n      retry: {on: [node]}\n      restart: on-node-fault\n")
    )
    assert found[0][0] == "jobs.a.policy"
    assert "retry and restart" in found[0][1]


def test_restart_on_node_fault_is_read_as_retry_on_node_with_a_warning(parse: Parse) -> None:
    parsed = parse(one_job("    policy:\n      restart: on-node-fault\n"))
    assert parsed.model.jobs["a"].policy.retry.on == ["node"]
    assert "jobs.a.policy.restart: deprecated, read as retry: {on: [node]}" in parsed.warnings


def test_restart_with_another_value_is_rejected(paths: Paths) -> None:
    assert paths(one_job("    policy:\n      restart: always\n")) == ["jobs.a.policy.restart"]


def test_jobs_inherit_the_default_retry_unless_they_declare_their_own(parse: Parse) -> None:
    parsed = parse(
        "version: v4\ndefaults:\n  job:\n    policy:\n      retry: {on: [node], attempts: 2}\n"
        "jobs:\n"
        "  inherits:\n    image: {uri: docker://a}\n    policy: {timeout: {execute: 5m}}\n"
        "  own:\n    image: {uri: docker://a}\n    policy: {retry: {on: [75]}}\n"
        "  restarts:\n    image: {uri: docker://a}\n    policy: {restart: on-node-fault}\n"
    )
    assert parsed.jobs["inherits"].policy.retry.on == ["node"]
    assert parsed.jobs["inherits"].policy.retry.attempts == 2
    assert parsed.jobs["inherits"].policy.timeout.execute_seconds == 300
    assert parsed.jobs["own"].policy.retry.on == [75]
    assert parsed.jobs["own"].policy.retry.attempts is None
    assert parsed.jobs["restarts"].policy.retry.attempts is None


def test_a_job_saying_restart_never_inherits_no_default_retry(parse: Parse) -> None:
    parsed = parse(
        "version: v4\ndefaults:\n  job:\n    policy:\n      retry: {on: [node, 1], attempts: 5}\n"
        "jobs:\n  a:\n    image: {uri: docker://a}\n    policy: {restart: never}\n"
    )
    assert parsed.jobs["a"].policy.effective_retry is None


# --- services -------------------------------------------------------------------------------


def service(body: str) -> str:
    return "version: v4\nservices:\n  s:\n    image: {uri: docker://nginx}\n" + body


def test_policy_on_a_service_is_accepted_and_ignored_with_a_warning(parse: Parse) -> None:
    parsed = parse(service("    policy:\n      timeout: {execute: 1h}\n"))
    assert parsed.model.services["s"].policy is None
    assert parsed.warnings == ["services.s.policy: services have no execution policy; ignored"]


def test_a_service_without_policy_has_no_warning(parse: Parse) -> None:
    assert parse(service("")).warnings == []


ENDPOINT = (
    "    network:\n      ports: [{{name: web, port: 80}}]\n"
    "      endpoints: [{{name: '{name}', port-name: web, protocol: {protocol}}}]\n"
)


@pytest.mark.parametrize("name", ["web", "my-app_2", "0"])
def test_endpoint_names_of_lowercase_letters_digits_dash_underscore_are_accepted(
    parse: Parse, name: str
) -> None:
    parsed = parse(service(ENDPOINT.format(name=name, protocol="http")))
    assert parsed.model.services["s"].network.endpoints[0].name == name


@pytest.mark.parametrize("name", ["Web", "my.app", "a b", ""])
def test_endpoint_names_with_other_characters_are_rejected(paths: Paths, name: str) -> None:
    found = paths(service(ENDPOINT.format(name=name, protocol="http")))
    assert found == ["services.s.network.endpoints[0].name"]


@pytest.mark.parametrize("protocol", ["http", "https", "HTTPS"])
def test_endpoint_protocols_http_and_https_are_accepted(parse: Parse, protocol: str) -> None:
    parse(service(ENDPOINT.format(name="web", protocol=protocol)))


@pytest.mark.parametrize("protocol", ["grpc", "grpcs", "tcp", "tls"])
def test_endpoint_protocols_fuzzball_v4_names_are_accepted(parse: Parse, protocol: str) -> None:
    parsed = parse(service(ENDPOINT.format(name="web", protocol=protocol)))
    endpoint = parsed.model.services["s"].network.endpoints[0]
    assert endpoint.protocol == protocol


@pytest.mark.parametrize("protocol", ["ftp", "udp"])
def test_endpoint_protocols_fuzzball_does_not_name_are_rejected(
    paths: Paths, protocol: str
) -> None:
    found = paths(service(ENDPOINT.format(name="web", protocol=protocol)))
    assert found == ["services.s.network.endpoints[0].protocol"]


def test_endpoints_must_proxy_to_a_declared_port(violations: Violations) -> None:
    text = service(
        "    network:\n      ports: [{name: web, port: 80}]\n"
        "      endpoints: [{name: e, port-name: admin}]\n"
    )
    assert violations(text) == [
        ("services.s.network.endpoints[0].port-name", "no port named admin in network.ports")
    ]


def test_probes_set_exactly_one_action(parse: Parse, paths: Paths) -> None:
    parse(service("    readiness-probe: {http-get: {path: /, port: 80}, period-seconds: 5}\n"))
    parse(service("    liveness-probe: {exec: {command: [true]}}\n"))
    parse(service("    liveness-probe: {grpc: {port: 50051}}\n"))
    parse(service("    readiness-probe: {tcp-socket: {port: 80}}\n"))
    both = "    readiness-probe: {tcp-socket: {port: 80}, grpc: {port: 1}}\n"
    assert paths(service(both)) == ["services.s.readiness-probe"]
    assert paths(service("    readiness-probe: {period-seconds: 5}\n")) == [
        "services.s.readiness-probe"
    ]


# --- dependencies -----------------------------------------------------------------------------


def test_dependencies_on_existing_jobs_and_services_are_accepted(parse: Parse) -> None:
    parsed = parse(
        "version: v4\njobs:\n  a: {image: {uri: docker://x}}\n"
        "  b: {image: {uri: docker://x}, depends-on: [{name: a}, {name: s, status: running}]}\n"
        "services:\n  s: {image: {uri: docker://x}}\n"
    )
    statuses = [d.status for d in parsed.model.jobs["b"].depends_on]
    assert statuses == ["FINISHED", "RUNNING"]


def test_dependencies_on_missing_steps_name_the_field_path(violations: Violations) -> None:
    found = violations(
        "version: v4\njobs:\n  run-blast:\n    image: {uri: docker://x}\n"
        "    depends-on: [{name: nope, status: FINISHED}]\n"
    )
    assert found == [("jobs.run-blast.depends-on[0].name", "no job or service is named nope")]


def test_dependency_status_must_be_finished_failed_or_running(paths: Paths) -> None:
    text = (
        "version: v4\njobs:\n  a: {image: {uri: docker://x}}\n"
        "  b: {image: {uri: docker://x}, depends-on: [{name: a, status: DONE}]}\n"
    )
    assert paths(text) == ["jobs.b.depends-on[0].status"]


def test_running_dependencies_name_services_only(paths: Paths) -> None:
    text = (
        "version: v4\njobs:\n  a: {image: {uri: docker://x}}\n"
        "  b: {image: {uri: docker://x}, depends-on: [{name: a, status: RUNNING}]}\n"
    )
    assert paths(text) == ["jobs.b.depends-on[0].status"]


def test_dependency_cycles_are_rejected_naming_the_cycle(violations: Violations) -> None:
    found = violations(
        "version: v4\njobs:\n"
        "  a: {image: {uri: docker://x}, depends-on: [{name: c}]}\n"
        "  b: {image: {uri: docker://x}, depends-on: [{name: a}]}\n"
        "  c: {image: {uri: docker://x}, depends-on: [{name: x-ok}, {name: b}]}\n"
        "  x-ok: {image: {uri: docker://x}}\n"
    )
    assert found == [
        ("jobs.a.depends-on[0].name", "dependency cycle: jobs.a -> jobs.c -> jobs.b -> jobs.a")
    ]


def test_a_step_depending_on_itself_is_a_cycle(violations: Violations) -> None:
    found = violations(
        "version: v4\njobs:\n  a: {image: {uri: docker://x}, depends-on: [{name: a}]}\n"
    )
    assert found == [("jobs.a.depends-on[0].name", "dependency cycle: jobs.a -> jobs.a")]


def test_v1_requires_cycles_are_rejected_at_the_requires_path(violations: Violations) -> None:
    found = violations(
        "version: v1\njobs:\n  a: {image: {uri: docker://x}, requires: [b]}\n"
        "  b: {image: {uri: docker://x}, requires: [a]}\n"
    )
    assert found == [("jobs.a.requires[0]", "dependency cycle: jobs.a -> jobs.b -> jobs.a")]


def test_cycle_detection_is_linear_in_a_long_chain(parse: Parse) -> None:
    jobs = "".join(
        f"  j{i}: {{image: {{uri: docker://x}}, depends-on: [{{name: j{i - 1}}}]}}\n"
        for i in range(1, 20000)
    )
    text = (
        "version: v4\njobs:\n  j0: {image: {uri: docker://x}, depends-on: [{name: j19999}]}\n"
        + jobs
    )
    with pytest.raises(InvalidArgument) as caught:
        parse_workflow(text)
    ((path, message),) = field_violations(caught.value)
    assert path == "jobs.j0.depends-on[0].name"
    assert message.count("->") == 20000


def test_image_builds_from_another_built_image_are_accepted(parse: Parse) -> None:
    parsed = parse(
        one_job(
            "",
            head="images:\n  base: {from: {uri: docker://rockylinux:9}}\n"
            "  tools: {from: {uri: fuzzball://user/base}, post: 'dnf install -y jq'}\n",
        )
    )
    assert set(parsed.model.images) == {"base", "tools"}


def test_image_build_cycles_are_rejected_naming_the_cycle(violations: Violations) -> None:
    found = violations(
        one_job(
            "",
            head="images:\n  a: {from: {uri: fuzzball://user/b}}\n  b: {from: {uri: fb://user/a}}\n",
        )
    )
    assert found == [("images.a.from.uri", "image build cycle: images.a -> images.b -> images.a")]


def test_an_image_of_another_scope_with_the_same_name_is_not_a_build_dependency(
    parse: Parse,
) -> None:
    parse(one_job("", head="images:\n  a: {from: {uri: fuzzball://group/a}}\n"))


def test_a_built_images_files_name_declared_files_at_absolute_paths(
    violations: Violations,
) -> None:
    found = violations(
        one_job(
            "",
            head="files: {conf: 'x=1'}\nimages:\n  t:\n    from: {uri: docker://a}\n"
            "    files: {/etc/a.conf: 'file://conf', relative: 'x', /etc/b: 'file://nosuch'}\n",
        )
    )
    assert found == [
        ("images.t.files.relative", "the path in the container must be absolute"),
        ("images.t.files./etc/b", "file nosuch is not declared in files"),
    ]


# --- volumes and mounts -----------------------------------------------------------------------


def test_mounts_of_declared_volumes_are_accepted(parse: Parse) -> None:
    parsed = parse(
        one_job(
            "    mounts: {/data: {volume: v}}\n",
            head="volumes:\n  v: {reference: volume://user/ephemeral}\n",
        )
    )
    assert parsed.model.jobs["a"].mounts["/data"].volume == "v"


def test_mounts_of_undeclared_volumes_are_invalid_arguments(violations: Violations) -> None:
    found = violations(one_job("    mounts: {/data: {volume: ghost}}\n"))
    assert found == [("jobs.a.mounts./data.volume", "volume ghost is not declared in volumes")]


def test_v1_mounts_of_undeclared_volumes_name_the_v1_path(violations: Violations) -> None:
    found = violations(
        "version: v1\njobs:\n  a:\n    image: {uri: docker://x}\n"
        "    mounts: {ghost: {location: /data}}\n"
    )
    assert found == [("jobs.a.mounts.ghost", "volume ghost is not declared in volumes")]


def test_default_mounts_of_undeclared_volumes_are_rejected(paths: Paths) -> None:
    text = one_job("", head="defaults:\n  job:\n    mounts: {/data: {volume: ghost}}\n")
    assert paths(text) == ["defaults.job.mounts./data.volume"]


# --- step files ----------------------------------------------------------------------------

FILES_HEAD = "files:\n  conf: 'x=1'\n"


def test_step_files_naming_a_declared_file_are_accepted(parse: Parse) -> None:
    parsed = parse(one_job("    files: {/etc/app.conf: 'file://conf'}\n", head=FILES_HEAD))
    assert parsed.model.jobs["a"].files == {"/etc/app.conf": "file://conf"}


def test_step_files_naming_an_undeclared_file_are_rejected(violations: Violations) -> None:
    found = violations(one_job("    files: {/etc/app.conf: 'file://ghost'}\n", head=FILES_HEAD))
    assert found == [("jobs.a.files./etc/app.conf", "file ghost is not declared in files")]


def test_step_files_written_inline_are_accepted_as_the_content(parse: Parse) -> None:
    parsed = parse(one_job("    files: {/etc/app.conf: 'y=2'}\n", head=FILES_HEAD))
    assert parsed.model.jobs["a"].files == {"/etc/app.conf": "y=2"}


def test_step_files_hold_the_named_file_or_the_inline_content(parse: Parse) -> None:
    text = one_job("    files: {/etc/a.conf: 'file://conf', /etc/b.conf: 'y=2'}\n", head=FILES_HEAD)
    parsed = parse(text)
    contents = step_file_contents(parsed.model.jobs["a"].files, parsed.model.files)
    assert contents == {"/etc/a.conf": "x=1", "/etc/b.conf": "y=2"}


def test_step_files_naming_no_file_after_the_scheme_are_rejected(violations: Violations) -> None:
    found = violations(one_job("    files: {/etc/app.conf: 'file://'}\n", head=FILES_HEAD))
    assert found == [("jobs.a.files./etc/app.conf", "must name a top-level file as file://NAME")]


def test_step_files_must_land_on_absolute_paths(paths: Paths) -> None:
    assert paths(one_job("    files: {etc/app.conf: 'file://conf'}\n", head=FILES_HEAD)) == [
        "jobs.a.files.etc/app.conf"
    ]


@pytest.mark.parametrize(
    "reference",
    [
        "volume://user/ephemeral",
        "volume://user/persistent/results",
        "volume://group/persistent/shared",
    ],
)
def test_volume_references_are_accepted(parse: Parse, reference: str) -> None:
    parsed = parse(one_job("", head=f"volumes:\n  v: {{reference: '{reference}'}}\n"))
    assert parsed.warnings == []


@pytest.mark.parametrize("reference", ["s3://bucket", "volume://user", "ephemeral"])
def test_malformed_volume_references_are_rejected(paths: Paths, reference: str) -> None:
    assert paths(one_job("", head=f"volumes:\n  v: {{reference: '{reference}'}}\n")) == [
        "volumes.v.reference"
    ]


def test_nameless_persistent_references_produce_a_warning(parse: Parse) -> None:
    parsed = parse(one_job("", head="volumes:\n  v: {reference: 'volume://user/persistent'}\n"))
    assert len(parsed.warnings) == 1
    assert parsed.warnings[0].startswith("volumes.v.reference: nameless persistent reference")


def test_volume_ingress_and_egress_files_are_read(parse: Parse) -> None:
    parsed = parse(
        one_job(
            "",
            head="volumes:\n  v:\n    reference: volume://user/ephemeral\n"
            "    ingress:\n      - {source: {uri: 'https://x/in.txt'}, destination: {uri: 'file://in.txt'}}\n"
            "    egress:\n      - source: {uri: 'file://out'}\n"
            "        destination: {uri: 's3://b/out', secret: 'secret://user/s3'}\n",
        )
    )
    volume = parsed.model.volumes["v"]
    assert volume.ingress[0].destination.uri == "file://in.txt"
    assert volume.egress[0].destination.secret == "secret://user/s3"


EGRESSED_VOLUME = (
    "volumes:\n  v:\n    reference: volume://user/ephemeral\n"
    "    egress:\n      - source: {uri: 'file://out'}\n"
    "        destination: {uri: 's3://b/out', secret: 'secret://user/s3'}\n"
)


def _serving(persist: str) -> str:
    return (
        "services:\n  s:\n    image: {uri: docker://nginx}\n"
        f"    mounts: {{/data: {{volume: v}}}}\n{persist}"
    )


def test_an_egress_behind_a_persisting_service_is_warned_as_never_running(parse: Parse) -> None:
    parsed = parse(one_job("", head=EGRESSED_VOLUME) + _serving("    persist: true\n"))

    assert len(parsed.warnings) == 1
    assert parsed.warnings[0].startswith("volumes.v.egress: never runs: services.s mounts")
    assert "(persist: true)" in parsed.warnings[0]


def test_an_egress_behind_a_workflow_of_services_alone_is_warned_as_never_running(
    parse: Parse,
) -> None:
    parsed = parse("version: v4\n" + EGRESSED_VOLUME + _serving(""))

    assert [w.split(":")[0] for w in parsed.warnings] == ["volumes.v.egress"]
    assert "a workflow of services alone" in parsed.warnings[0]


def test_an_egress_behind_a_persisting_service_mounting_it_from_the_jobs_defaults_is_warned(
    parse: Parse,
) -> None:
    parsed = parse(
        "version: v4\ndefaults:\n  job:\n    mounts: {/data: v}\n"
        + EGRESSED_VOLUME
        + "jobs:\n  a:\n    image: {uri: docker://a}\n"
        + "services:\n  s:\n    image: {uri: docker://nginx}\n    persist: true\n"
    )

    assert [w.split(":")[0] for w in parsed.warnings] == ["volumes.v.egress"]


def test_an_egress_behind_a_service_stopped_after_the_jobs_is_not_warned(parse: Parse) -> None:
    parsed = parse(one_job("", head=EGRESSED_VOLUME) + _serving(""))

    assert parsed.warnings == []


# --- files and secrets ------------------------------------------------------------------------


def test_templates_in_files_are_data_and_kept_unchanged(parse: Parse) -> None:
    parsed = parse(
        one_job(
            "    files: {/etc/app.conf: 'file://conf'}\n",
            head="files:\n  conf: |\n    name={{ .Name }}\n    {{- range .Items }}x{{ end }}\n",
        )
    )
    assert parsed.model.files["conf"] == "name={{ .Name }}\n{{- range .Items }}x{{ end }}\n"
    assert "{{ .Name }}" in parsed.to_yaml()


@pytest.mark.parametrize(
    "field",
    [
        "    image: {uri: docker://x, secret: {a: TOPSECRETVALUE}}\n",
        "    env: [TOPSECRETVALUE]\n",
        "    image: {uri: docker://x, secrets: {token: [TOPSECRETVALUE]}}\n",
    ],
)
def test_secret_values_are_never_echoed_in_errors(field: str) -> None:
    text = "version: v4\njobs:\n  a:\n" + field
    if "image" not in field:
        text += "    image: {uri: docker://x}\n"
    with pytest.raises(InvalidArgument) as caught:
        parse_workflow(text)
    assert "TOPSECRETVALUE" not in str(caught.value)
    assert "TOPSECRETVALUE" not in repr(caught.value.details)


# --- resources, arrays, multinode, timeouts -------------------------------------------------


def test_memory_sizes_and_durations_are_read_as_numbers(parse: Parse) -> None:
    parsed = parse(
        one_job(
            "    resource:\n      memory: {size: 0.5GiB, by-core: true}\n"
            "      cpu: {cores: 4, affinity: socket, sockets: 1, threads: true}\n"
            "      devices: {nvidia.com/gpu: 1}\n      exclusive: true\n"
            "      annotations: {gpu-family: hopper}\n"
            "    policy:\n      timeout: {execute: 10m0s}\n"
        )
    )
    job = parsed.model.jobs["a"]
    assert job.resource.memory.size_bytes == 512 * 1024**2
    assert job.resource.cpu.affinity == "SOCKET"
    assert job.resource.devices == {"nvidia.com/gpu": 1}
    assert job.policy.timeout.execute_seconds == 600


@pytest.mark.parametrize(
    ("field", "path"),
    [
        ("    resource: {memory: {size: 1GX}}\n", "jobs.a.resource.memory.size"),
        ("    resource: {cpu: {cores: 0}}\n", "jobs.a.resource.cpu.cores"),
        ("    resource: {cpu: {affinity: THREAD}}\n", "jobs.a.resource.cpu.affinity"),
        (
            "    resource: {devices: {nvidia.com/gpu: many}}\n",
            "jobs.a.resource.devices.nvidia.com/gpu",
        ),
        ("    policy: {timeout: {execute: 10}}\n", "jobs.a.policy.timeout.execute"),
        ("    multinode: {nodes: 2, implementation: pvm}\n", "jobs.a.multinode.implementation"),
        ("    task-array: {start: 10, end: 1}\n", "jobs.a.task-array"),
        ("    task-array: {start: 1, end: 10, concurrency: 0}\n", "jobs.a.task-array.concurrency"),
        ("    cwd: relative/dir\n", "jobs.a.cwd"),
        ("    env: [NOEQUALS]\n", "jobs.a.env[0]"),
        ("    script: 'echo'\n", "jobs.a"),
        ("    image: {uri: docker://x, cache-ttl: soon}\n", "jobs.a.image.cache-ttl"),
        ("    depend-on: []\n", "jobs.a.depend-on"),
    ],
)
def test_malformed_job_fields_are_rejected_at_their_path(
    paths: Paths, field: str, path: str
) -> None:
    text = one_job(field)
    if field.startswith("    image:"):
        text = text.replace("    image:\n      uri: docker://alpine:3.19\n", "", 1)
    assert paths(text) == [path]


def test_multinode_and_task_array_fields_are_read(parse: Parse) -> None:
    parsed = parse(
        one_job(
            "    multinode: {nodes: 2, procs-per-node: 4, implementation: OpenMPI}\n"
            "    task-array: {start: 1, end: 1000000, concurrency: 200}\n"
        )
    )
    job = parsed.model.jobs["a"]
    assert (job.multinode.nodes, job.multinode.implementation) == (2, "openmpi")
    assert job.task_array.count == 1_000_000


def test_every_error_in_a_file_is_reported_at_once(violations: Violations) -> None:
    found = violations(
        "version: v4\njobs:\n"
        "  a: {image: {uri: 'alpine'}, resource: {cpu: {cores: x}}, depends-on: [{name: zz}]}\n"
        "  b: {image: {uri: docker://x}, mounts: {/d: {volume: nope}}}\n"
    )
    assert [p for p, _ in found] == [
        "jobs.a.image.uri",
        "jobs.a.resource.cpu.cores",
        "jobs.a.depends-on[0].name",
        "jobs.b.mounts./d.volume",
    ]


def test_a_workflow_needs_a_job_or_a_service(paths: Paths) -> None:
    assert paths("version: v4\nvolumes: {}\n") == ["jobs"]


@pytest.mark.parametrize("version", ["v2", "'4'", "null"])
def test_versions_other_than_v1_and_v4_are_rejected(paths: Paths, version: str) -> None:
    assert paths(f"version: {version}\njobs: {{}}\n") == ["version"]


def test_plugin_validators_add_errors_with_paths() -> None:
    def no_gpus(model):  # a site rule, as a plugin would provide
        return [
            (f"jobs.{name}.resource.devices", "GPUs are not available here")
            for name, job in (model.jobs or {}).items()
            if job.resource and job.resource.devices
        ]

    text = one_job("    resource: {devices: {nvidia.com/gpu: 1}}\n")
    with pytest.raises(InvalidArgument) as caught:
        parse_workflow(text, extra_validators=[no_gpus])
    assert field_violations(caught.value) == [
        ("jobs.a.resource.devices", "GPUs are not available here")
    ]
    assert parse_workflow(one_job(""), extra_validators=[no_gpus]).model.jobs


def test_defaults_merge_into_jobs_with_job_values_winning(parse: Parse) -> None:
    parsed = parse(
        "version: v4\nvolumes: {v: {reference: volume://user/ephemeral}, w: {reference: volume://user/ephemeral}}\n"
        "defaults:\n  job:\n    env: [A=1, B=2]\n    mounts: {/data: {volume: v}}\n"
        "    resource: {cpu: {cores: 2, affinity: NUMA}, memory: {size: 1GiB}}\n"
        "jobs:\n  a:\n    image: {uri: docker://x}\n    env: [B=3]\n"
        "    mounts: {/data: {volume: w}, /x: {volume: v}}\n"
        "    resource: {cpu: {cores: 8}}\n"
    )
    job = parsed.jobs["a"]
    assert job.env == ["A=1", "B=3"]
    assert {path: m.volume for path, m in job.mounts.items()} == {"/data": "w", "/x": "v"}
    assert (job.resource.cpu.cores, job.resource.cpu.affinity) == (8, "NUMA")
    assert job.resource.memory.size == "1GiB"
    assert parsed.model.jobs["a"].env == ["B=3"]  # the model stays as written


def test_endpoint_names_are_unique_across_services(paths: Paths) -> None:
    endpoint = ENDPOINT.format(name="web", protocol="http")
    text = service(endpoint) + "  t:\n    image: {uri: docker://nginx}\n" + endpoint
    assert paths(text) == ["services.t.network.endpoints[0].name"]


def test_a_job_and_a_service_may_not_share_a_name(paths: Paths) -> None:
    text = one_job("") + "services:\n  a: {image: {uri: docker://nginx}}\n"
    assert paths(text) == ["services.a"]


def test_service_scale_and_persist_are_read(parse: Parse, paths: Paths) -> None:
    parsed = parse(service("    persist: true\n    scale: {min: 1, max: 4}\n"))
    assert parsed.model.services["s"].persist is True
    assert parsed.model.services["s"].scale.max == 4
    assert paths(service("    scale: {min: 5, max: 2}\n")) == ["services.s.scale"]


SERVED = (
    "    network:\n      ports: [{name: http, port: 80}]\n"
    "      endpoints: [{name: web, port-name: http}]\n"
)


def test_a_service_scaled_to_zero_with_an_endpoint_is_accepted(parse: Parse) -> None:
    parsed = parse(service(SERVED + "    scale: {min: 0, idle-timeout: 30m}\n"))
    assert parsed.model.services["s"].scale.min == 0
    assert parsed.warnings == []


def test_a_service_scaled_to_zero_without_an_endpoint_is_refused(violations: Violations) -> None:
    found = violations(service("    scale: {min: 0}\n"))
    assert [path for path, _ in found] == ["services.s.scale.min"]
    assert "would never start" in found[0][1]


def test_an_idle_timeout_of_a_service_not_scaled_to_zero_is_warned(parse: Parse) -> None:
    parsed = parse(service("    scale: {min: 1, idle-timeout: 30m}\n"))
    assert [w.split(":")[0] for w in parsed.warnings] == ["services.s.scale.idle-timeout"]


def test_two_ports_of_one_name_are_refused(paths: Paths) -> None:
    ports = "    network:\n      ports: [{name: p, port: 80}, {name: p, port: 81}]\n"
    assert paths(service(ports)) == ["services.s.network.ports[1].name"]


def test_an_endpoint_on_a_udp_port_is_refused(violations: Violations) -> None:
    found = violations(
        service(
            "    network:\n      ports: [{name: dns, port: 53, protocol: udp}]\n"
            "      endpoints: [{name: web, port-name: dns}]\n"
        )
    )
    assert found == [
        (
            "services.s.network.endpoints[0].port-name",
            "port dns is udp; an endpoint proxies TCP streams",
        )
    ]


def test_services_whose_names_give_one_host_name_are_refused(violations: Violations) -> None:
    found = violations(
        "version: v4\nservices:\n  Web: {image: {uri: docker://a}}\n"
        "  web: {image: {uri: docker://a}}\n  w_1: {image: {uri: docker://a}}\n"
        "  w-1: {image: {uri: docker://a}}\n"
    )
    assert [path for path, _ in found] == ["services.web", "services.w-1"]


def test_ingress_and_egress_uris_carrying_credentials_are_refused_without_repeating_them(
    violations: Violations,
) -> None:
    found = violations(
        one_job(
            "",
            head="volumes:\n  v:\n    reference: volume://user/ephemeral\n"
            "    ingress:\n      - source: {uri: 'https://alice:hunter2@data.example/in'}\n"
            "        destination: {uri: 'file://in'}\n"
            "    egress:\n      - source: {uri: 'file://out'}\n"
            "        destination: {uri: 's3://bob:s3cr3t@bucket/out'}\n",
        )
    )

    assert [path for path, _ in found] == [
        "volumes.v.ingress[0].source.uri",
        "volumes.v.egress[0].destination.uri",
    ]
    assert "secret" in found[0][1]
    assert "hunter2" not in repr(found) and "s3cr3t" not in repr(found)


def test_a_presigned_ingress_url_is_not_taken_for_credentials(parse: Parse) -> None:
    parsed = parse(
        one_job(
            "",
            head="volumes:\n  v:\n    reference: volume://user/ephemeral\n"
            "    ingress:\n      - source: {uri: 'https://data.example/in?Signature=a@b'}\n"
            "        destination: {uri: 'file://in'}\n",
        )
    )

    assert parsed.model.volumes["v"].ingress[0].source.uri.endswith("Signature=a@b")


def test_a_persistent_use_without_a_name_produces_a_warning(parse: Parse) -> None:
    parsed = parse(one_job("", head="volumes:\n  v: {use: persistent}\n"))
    assert [w.split(":")[0] for w in parsed.warnings] == ["volumes.v.use"]
    assert "default persistent volume" in parsed.warnings[0]


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ("{use: persistent, name: results, reference: 'volume://user/ephemeral'}", "use"),
        ("{type: EPHEMERAL, reference: 'volume://user/persistent/results'}", "type"),
        ("{type: HOST, reference: 'volume://user/ephemeral'}", "type: HOST"),
        ("{use: persistent, name: a, reference: 'volume://user/persistent/b'}", "name: a"),
        ("{use: persistent, type: EPHEMERAL}", "use: persistent"),
        ("{reference: 'volume://user/ephemeral/scratch'}", "has no name"),
    ],
)
def test_a_volume_whose_kind_fields_contradict_each_other_is_refused(
    violations: Violations, fields: str, named: str
) -> None:
    found = violations(one_job("", head=f"volumes:\n  v: {fields}\n"))
    assert [path for path, _ in found] == ["volumes.v"]
    assert named in found[0][1]


@pytest.mark.parametrize(
    ("fields", "reference"),
    [
        ("{type: EPHEMERAL, name: scratch}", "volume://user/ephemeral"),
        ("{use: ephemeral, name: scratch}", "volume://user/ephemeral"),
        ("{name: v, reference: 'volume://user/ephemeral'}", "volume://user/ephemeral"),
        ("{use: persistent, name: results}", "volume://user/persistent/results"),
        ("{name: results}", "volume://user/persistent/results"),
        ("{size: 1GiB}", "volume://user/ephemeral"),
    ],
)
def test_a_volume_stands_for_the_storage_reference_its_kind_fields_say(
    parse: Parse, fields: str, reference: str
) -> None:
    parsed = parse(one_job("", head=f"volumes:\n  v: {fields}\n"))
    assert parsed.model.volumes["v"].storage_reference == reference


def _commanded(body: str) -> str:
    return "version: v4\njobs:\n  a:\n    image: {uri: docker://alpine:3.19}\n" + body


def test_an_empty_argument_is_accepted_but_not_an_empty_program(
    parse: Parse, violations: Violations
) -> None:
    parsed = parse(_commanded("    command: [sh, -c, 'echo \"[$1]\"', sh, '']\n"))
    assert parsed.jobs["a"].command[-1] == ""
    found = violations(_commanded("    command: ['', x]\n"))
    assert found == [("jobs.a.command", "the first item, the program to run, may not be empty")]


def test_a_nul_in_an_argument_or_environment_entry_is_refused_naming_it(paths: Paths) -> None:
    assert paths(_commanded('    command: [echo, "a\\0b"]\n    env: ["A=x\\0y"]\n')) == [
        "jobs.a.command[1]",
        "jobs.a.env[0]",
    ]


def test_an_execute_timeout_of_zero_is_refused_rather_than_read_as_none(paths: Paths) -> None:
    assert paths(one_job("    policy: {timeout: {execute: 0s}}\n")) == ["jobs.a.policy.timeout"]


def test_memory_by_core_beyond_a_pebibyte_in_all_is_refused(violations: Violations) -> None:
    found = violations(
        one_job("    resource: {memory: {size: 1TiB, by-core: true}, cpu: {cores: 2048}}\n")
    )
    assert [path for path, _ in found] == ["jobs.a.resource"]
    assert "1 PiB" in found[0][1]


BY_CORE_TIB = "resource: {memory: {size: 1TiB, by-core: true}}"


@pytest.mark.parametrize(
    "head",
    [f"defaults:\n  job:\n    {BY_CORE_TIB}\n", f"defaults:\n  {BY_CORE_TIB}\n"],
    ids=["defaults.job", "defaults"],
)
def test_memory_by_core_from_defaults_beyond_a_pebibyte_with_the_jobs_cores_is_refused(
    violations: Violations, head: str
) -> None:
    found = violations(one_job("    resource: {cpu: {cores: 2048}}\n", head=head))
    assert [path for path, _ in found] == ["jobs.a.resource"]
    assert "1 PiB" in found[0][1]
    assert "defaults" in found[0][1]


def test_cores_from_defaults_beyond_a_pebibyte_with_the_jobs_memory_by_core_is_refused(
    paths: Paths,
) -> None:
    text = one_job(
        "    resource: {memory: {size: 1TiB, by-core: true}}\n",
        head="defaults:\n  job:\n    resource: {cpu: {cores: 2048}}\n",
    )
    assert paths(text) == ["jobs.a.resource"]


def test_memory_by_core_from_defaults_beyond_a_pebibyte_with_a_services_cores_is_refused(
    paths: Paths,
) -> None:
    text = (
        f"version: v4\ndefaults:\n  service:\n    {BY_CORE_TIB}\n"
        "services:\n  s:\n    image: {uri: docker://nginx}\n"
        "    resource: {cpu: {cores: 2048}}\n"
    )
    assert paths(text) == ["services.s.resource"]


def test_memory_by_core_from_defaults_within_a_pebibyte_is_accepted(parse: Parse) -> None:
    parsed = parse(
        one_job("    resource: {cpu: {cores: 1024}}\n", head=f"defaults:\n  {BY_CORE_TIB}\n")
    )
    assert parsed.jobs["a"].resource.memory.size == "1TiB"


def test_a_volume_name_other_than_its_key_beside_a_reference_is_warned_as_ignored(
    parse: Parse,
) -> None:
    parsed = parse(
        one_job("", head="volumes:\n  v: {name: other, reference: 'volume://user/ephemeral'}\n")
    )
    assert [w.split(":")[0] for w in parsed.warnings] == ["volumes.v.name"]
    assert (
        parse(
            one_job("", head="volumes:\n  v: {name: v, reference: 'volume://user/ephemeral'}\n")
        ).warnings
        == []
    )
