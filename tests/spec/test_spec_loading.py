"""Hostile and unusual input: every byte string ends in a model or an InvalidArgument, fast."""

from __future__ import annotations

import contextlib
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzzball_core.errors import InvalidArgument
from fuzzball_core.spec import parse_workflow
from fuzzball_core.spec.loading import MAX_DEPTH, MAX_DOCUMENT_BYTES, load_document

VALID = b"version: v4\njobs:\n  a:\n    image: {uri: docker://alpine}\n"


def rejected(data: bytes | str) -> str:
    """The message of the InvalidArgument that parsing ``data`` must raise, and fast."""
    started = time.perf_counter()
    with pytest.raises(InvalidArgument) as caught:
        parse_workflow(data)
    assert time.perf_counter() - started < 30  # a hang guard: parsing first would take minutes
    return caught.value.message


def test_a_50_megabyte_file_is_rejected_before_parsing() -> None:
    message = rejected(b"a: " + b"x" * (50 * 1024 * 1024))
    assert f"limit is {MAX_DOCUMENT_BYTES} bytes" in message


def test_50_megabytes_of_text_is_rejected_too() -> None:
    assert "limit" in rejected("#" * (50 * 1024 * 1024))


@pytest.mark.parametrize("opener", [b"[", b"{a: ", b"- "])
def test_nesting_10000_deep_is_rejected(opener: bytes) -> None:
    data = opener * 10_000 + b"x"
    assert f"deeper than {MAX_DEPTH}" in rejected(data)


def test_a_billion_laughs_alias_bomb_is_rejected() -> None:
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, 10):
        refs = ", ".join([f"*a{i - 1}"] * 10)
        lines.append(f"a{i}: &a{i} [{refs}]")
    assert "aliases are expanded" in rejected("\n".join(lines) + "\n")


def test_a_merge_key_bomb_is_rejected() -> None:
    lines = ["m0: &m0 {a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7, h: 8}"]
    for i in range(1, 12):
        lines.append(f"m{i}: &m{i} [" + ", ".join([f"*m{i - 1}"] * 8) + "]")
    assert "nodes" in rejected("\n".join(lines) + "\n")


def test_anchors_and_merge_keys_of_ordinary_size_are_read() -> None:
    parsed = parse_workflow(
        b"version: v4\njobs:\n  a: &common {image: {uri: docker://alpine}}\n"
        b"  b:\n    <<: *common\n    command: [echo, hi]\n"
    )
    assert parsed.model.jobs["b"].image.uri == "docker://alpine"
    assert parsed.model.jobs["b"].command == ["echo", "hi"]


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"\x00\x01\x02\xff\xfe", "not"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "not"),
        (b"version: v4\njobs: {a: {b: 1}\n", "line"),
        (b"", "empty"),
        (b"# just a comment\n", "empty"),
        (b"--- {version: v4}\n--- {version: v4}\n", "more than one"),
        (b"version: v4\nversion: v1\n", "duplicate key"),
        (b"version: !!python/object:os.system echo\n", "tag"),
        (b"version: v4\njobs: *nowhere\n", "alias"),
        (b"? [a, b]\n: c\n", "keys must be scalars"),
    ],
)
def test_malformed_files_are_invalid_arguments(data: bytes, problem: str) -> None:
    assert problem in rejected(data)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (
            b'version: v4\njobs:\n  a:\n    command: [echo, "a\x01b"]\n',
            "control character U+0001 at line 4, column 23: YAML does not allow it",
        ),
        ('x: "\u00e9\x1b"\n'.encode(), "control character U+001B at line 1, column 6"),
        (b"\x00\x01\x02binary", "not a text file: a NUL byte at line 1, column 1"),
        (b"a: 1\nb: \xff\xfe", "not UTF-8 or UTF-16 text: invalid leading UTF-8 octet at line 2"),
    ],
)
def test_unreadable_text_is_named_for_what_it_holds_and_where(data: bytes, problem: str) -> None:
    assert problem in rejected(data)


@pytest.mark.parametrize("data", [b"[1, 2]", b"just text", b"42", b"version: v4\njobs: [a, b]\n"])
def test_documents_of_the_wrong_shape_are_invalid_arguments(data: bytes) -> None:
    rejected(data)


def test_scalars_stay_text_until_the_model_types_them() -> None:
    data = load_document(b"a: 8\nb: yes\nc: 1.10\nd: ~\ne:\nf: '~'\ng: 2024-01-01\n")
    assert data == {
        "a": "8",
        "b": "yes",
        "c": "1.10",
        "d": None,
        "e": None,
        "f": "~",
        "g": "2024-01-01",
    }


def test_numbers_in_a_command_are_kept_as_written() -> None:
    parsed = parse_workflow(VALID + b"    command: [sleep, 1.50, 010]\n")
    assert parsed.model.jobs["a"].command == ["sleep", "1.50", "010"]


def test_utf16_files_are_read() -> None:
    parsed = parse_workflow(VALID.decode().encode("utf-16"))
    assert parsed.model.jobs["a"].image.uri == "docker://alpine"


def test_text_with_lone_surrogates_is_an_invalid_argument() -> None:
    rejected("version: v4\njobs: {a: {image: {uri: 'docker://\ud800'}}}\n")


KEYS = st.sampled_from(
    [
        "version",
        "jobs",
        "services",
        "volumes",
        "images",
        "a",
        "image",
        "uri",
        "depends-on",
        "name",
        "status",
        "mounts",
        "volume",
        "resource",
        "cpu",
        "cores",
        "memory",
        "size",
        "policy",
        "retry",
        "on",
        "task-array",
        "start",
        "end",
        "<<",
        "defaults",
        "job",
    ]
)
SCALARS = st.one_of(
    st.sampled_from(
        ["v1", "v4", "docker://x", "FINISHED", "FAILED", "1GiB", "node", "130", "-1", "~", ""]
    ),
    st.integers(-(2**70), 2**70),
    st.booleans(),
    st.none(),
    st.text(max_size=20),
)
DOCUMENTS = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(KEYS, children, max_size=5)
    ),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2000))
def test_any_byte_string_gives_a_model_or_an_invalid_argument(data: bytes) -> None:
    with contextlib.suppress(InvalidArgument):
        parse_workflow(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=2000))
def test_any_text_gives_a_model_or_an_invalid_argument(data: str) -> None:
    with contextlib.suppress(InvalidArgument):
        parse_workflow(data)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(DOCUMENTS, st.sampled_from(["v1", "v4"]))
def test_wrong_types_anywhere_give_an_invalid_argument_not_a_crash(
    body: object, version: str
) -> None:
    import yaml

    document = {"version": version, "jobs": {"a": body}, "volumes": body, "defaults": {"job": body}}
    try:
        parse_workflow(yaml.safe_dump(document))
    except InvalidArgument as error:
        assert error.details


def test_an_unreadable_file_is_named_in_the_message_like_an_invalid_one() -> None:
    with pytest.raises(InvalidArgument) as caught:
        parse_workflow(b"jobs: {a: [\n", source="ctrl.yaml")
    assert caught.value.message.startswith("ctrl.yaml: not a valid workflow file: ")
