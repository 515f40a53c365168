"""Integers in a workflow file are range-checked when it is read: ids, counts and seconds fit
the int32 the wire schema carries them in, and the error names the field. A file that passes
validation can be stored, planned and shown."""

from __future__ import annotations

import pytest
from test_spec_rules import Parse, Paths, Violations, one_job

from fuzzball_core.spec import plan_workflow
from fuzzball_core.spec.models import INT32_MAX, INT32_MIN

PAST_64_BITS = 9223372036854775806  # the start: every engine pass failed on it


def test_a_task_array_starting_past_64_bits_is_refused_naming_start_and_end(paths: Paths):
    text = one_job(f"    task-array: {{start: {PAST_64_BITS}, end: {PAST_64_BITS + 1}}}\n")
    assert paths(text) == ["jobs.a.task-array.start", "jobs.a.task-array.end"]


def test_a_task_array_end_past_int32_is_refused_naming_end(violations: Violations):
    text = one_job(f"    task-array: {{start: 1, end: {INT32_MAX + 1}}}\n")
    assert violations(text) == [
        ("jobs.a.task-array.end", f"must be less than or equal to {INT32_MAX}")
    ]


def test_a_task_array_of_more_than_int32_tasks_is_refused(violations: Violations):
    text = one_job(f"    task-array: {{start: {INT32_MIN}, end: {INT32_MAX}}}\n")
    assert violations(text) == [
        ("jobs.a.task-array", f"a task array holds at most {INT32_MAX} tasks")
    ]


def test_a_task_array_at_the_int32_edge_is_planned(parse: Parse):
    parsed = parse(one_job(f"    task-array: {{start: 1, end: {INT32_MAX}}}\n"))
    tasks = plan_workflow(parsed).stages["jobs.a"].tasks
    assert tasks is not None
    assert tasks.task_ids()[-1] == INT32_MAX


@pytest.mark.parametrize(
    ("field", "path"),
    [
        ("    resource: {cpu: {cores: 99999999999999999999}}\n", "jobs.a.resource.cpu.cores"),
        (
            "    resource: {devices: {nvidia.com/gpu: 4294967296}}\n",
            "jobs.a.resource.devices.nvidia.com/gpu",
        ),
        ("    multinode: {nodes: 9223372036854775808}\n", "jobs.a.multinode.nodes"),
        ("    policy: {retry: {attempts: 2147483648}}\n", "jobs.a.policy.retry.attempts"),
    ],
)
def test_a_count_past_int32_is_refused_naming_the_field(paths: Paths, field: str, path: str):
    assert paths(one_job(field)) == [path]


@pytest.mark.parametrize("ttl", ["99999999999999999999999999", "9223372036854775807"])
def test_an_image_ttl_in_seconds_past_the_longest_duration_is_refused(paths: Paths, ttl: str):
    head = f"images:\n  b:\n    from: {{uri: 'docker://alpine:3.19'}}\n    ttl: '{ttl}'\n"
    assert paths(one_job("", head=head)) == ["images.b.ttl"]


def test_an_image_ttl_of_a_digit_only_unicode_reads_as_one_is_refused_as_no_duration(
    violations: Violations,
):
    head = "images:\n  b:\n    from: {uri: 'docker://alpine:3.19'}\n    ttl: '\u00b2'\n"
    [(path, message)] = violations(one_job("", head=head))
    assert path == "images.b.ttl"
    assert message.startswith("must be a duration such as")


def test_an_integer_of_thousands_of_digits_is_refused_naming_the_field(paths: Paths):
    text = one_job(f"    task-array: {{start: 1, end: {'9' * 5000}}}\n")
    assert paths(text) == ["jobs.a.task-array.end"]


@pytest.mark.parametrize("cores", ["1.5", "'1.5'", "many"])
def test_a_count_that_is_no_whole_number_says_it_must_be_one(violations: Violations, cores):
    text = one_job(f"    resource: {{cpu: {{cores: {cores}}}}}\n")
    assert violations(text) == [("jobs.a.resource.cpu.cores", "must be a whole number")]
