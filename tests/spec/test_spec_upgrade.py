"""Upgrading v1 workflow files to v4."""

from __future__ import annotations

import yaml

from fuzzball_core.spec import parse_workflow, upgrade_to_v4

V1 = """\
version: v1
volumes:
  scratch: {reference: volume://user/ephemeral}
  results: {reference: volume://user/persistent}
defaults:
  job:
    mounts:
      scratch: {location: /scratch}
jobs:
  first:
    image: {uri: docker://alpine, cache-ttl: 3600}
    command: [sleep, 8]
    mounts:
      results: {location: /results}
  second:
    image: {uri: docker://alpine}
    requires: [first]
    policy:
      restart: on-node-fault
      timeout: {execute: 150s}
"""


def upgraded() -> dict:
    return yaml.safe_load(upgrade_to_v4(V1))


def test_upgrade_writes_version_v4() -> None:
    assert upgraded()["version"] == "v4"


def test_requires_becomes_depends_on_with_finished() -> None:
    second = upgraded()["jobs"]["second"]
    assert "requires" not in second
    assert second["depends-on"] == [{"name": "first", "status": "FINISHED"}]


def test_mounts_are_re_keyed_by_path_in_jobs_and_defaults() -> None:
    document = upgraded()
    assert document["jobs"]["first"]["mounts"] == {"/results": {"volume": "results"}}
    assert document["defaults"]["job"]["mounts"] == {"/scratch": {"volume": "scratch"}}


def test_restart_on_node_fault_is_written_as_retry_on_node() -> None:
    policy = upgraded()["jobs"]["second"]["policy"]
    assert policy == {"timeout": {"execute": "150s"}, "retry": {"on": ["node"]}}


def test_cache_ttl_is_written_as_an_integer_and_command_words_as_text() -> None:
    first = upgraded()["jobs"]["first"]
    assert first["image"]["cache-ttl"] == 3600
    assert first["command"] == ["sleep", "8"]


def test_upgrade_warns_about_nameless_persistent_references_and_restart() -> None:
    warnings = parse_workflow(V1).warnings
    assert any(w.startswith("volumes.results.reference: nameless persistent") for w in warnings)
    assert "jobs.second.policy.restart: deprecated, read as retry: {on: [node]}" in warnings


def test_validating_a_v1_file_validates_its_upgrade() -> None:
    original = parse_workflow(V1)
    assert original.source_version == "v1"
    assert parse_workflow(upgrade_to_v4(V1)).model == original.model


V1_REQUIRES_A_SERVICE = """\
version: v1
services:
  db: {image: {uri: docker://alpine}, command: [sleep, "600"]}
jobs:
  prepare: {image: {uri: docker://alpine}}
  client: {image: {uri: docker://alpine}, requires: [prepare, db]}
"""


def test_requires_naming_a_service_becomes_depends_on_with_running() -> None:
    client = yaml.safe_load(upgrade_to_v4(V1_REQUIRES_A_SERVICE))["jobs"]["client"]
    assert client["depends-on"] == [
        {"name": "prepare", "status": "FINISHED"},
        {"name": "db", "status": "RUNNING"},
    ]


def test_depends_on_a_service_without_a_status_means_running_without_a_warning() -> None:
    parsed = parse_workflow(
        "version: v4\nservices:\n  db: {image: {uri: docker://x}}\n"
        "jobs:\n  a: {image: {uri: docker://x}}\n"
        "  b: {image: {uri: docker://x}, depends-on: [{name: db}, {name: a}]}\n"
    )
    assert [(d.name, d.status) for d in parsed.model.jobs["b"].depends_on] == [
        ("db", "RUNNING"),
        ("a", "FINISHED"),
    ]
    assert parsed.warnings == []


def test_requires_in_a_v4_file_says_a_service_is_read_as_running() -> None:
    parsed = parse_workflow(
        "version: v4\nservices:\n  db: {image: {uri: docker://x}}\n"
        "jobs:\n  b: {image: {uri: docker://x}, requires: [db]}\n"
    )
    assert [(d.name, d.status) for d in parsed.model.jobs["b"].depends_on] == [("db", "RUNNING")]
    assert parsed.warnings == [
        "jobs.b.requires: deprecated, read as depends-on "
        "(FINISHED for a job, RUNNING for a service)"
    ]


def test_requires_next_to_depends_on_is_ignored_with_a_warning() -> None:
    parsed = parse_workflow(
        "version: v1\njobs:\n  a: {image: {uri: docker://x}}\n  b: {image: {uri: docker://x}}\n"
        "  c: {image: {uri: docker://x}, requires: [a], depends-on: [{name: b}]}\n"
    )
    assert [d.name for d in parsed.model.jobs["c"].depends_on] == ["b"]
    assert "jobs.c.requires: ignored because depends-on is set" in parsed.warnings


def test_two_v1_mounts_at_one_location_are_an_error() -> None:
    from fuzzball_core.errors import InvalidArgument
    from fuzzball_core.spec import field_violations

    text = (
        "version: v1\nvolumes:\n  a: {reference: volume://user/ephemeral}\n"
        "  b: {reference: volume://user/ephemeral}\n"
        "jobs:\n  j:\n    image: {uri: docker://x}\n"
        "    mounts: {a: {location: /d}, b: {location: /d}}\n"
    )
    try:
        parse_workflow(text)
    except InvalidArgument as error:
        assert field_violations(error) == [
            ("jobs.j.mounts.b.location", "/d is already the mount point of volume a")
        ]
    else:
        raise AssertionError("expected InvalidArgument")


def test_multi_line_scripts_are_written_as_literal_blocks() -> None:
    text = upgrade_to_v4(
        "version: v4\njobs:\n  a:\n    image: {uri: docker://x}\n"
        '    script: "#!/bin/sh\\necho hi\\n"\n'
    )
    assert "script: |\n      #!/bin/sh\n      echo hi\n" in text
