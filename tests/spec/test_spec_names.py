"""Workflow names and hold reasons are bounded and printable; text from a server is shown
with what a terminal would act on escaped."""

from __future__ import annotations

import pytest

from fuzzball_core.errors import InvalidArgument
from fuzzball_core.spec.names import (
    MAX_WORKFLOW_NAME,
    check_hold_reason,
    check_workflow_name,
    printable,
)


@pytest.mark.parametrize("name", ["hello", "nightly build #7", "Résumé — größe", "a" * 256])
def test_a_printable_name_within_the_limit_is_accepted(name):
    assert check_workflow_name(name) == name


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("nul\x00", "U+0000"),
        ("\x1b]0;owned\x07", "U+001B"),
        ("tab\there", "U+0009"),
        ("csi\x9b31m", "U+009B"),  # the one-byte C1 form of ESC [
        ("rtl\u202egpj.exe", "U+202E"),
        ("zero\u200bwidth", "U+200B"),
        ("line\u2028break", "U+2028"),
    ],
)
def test_a_name_with_a_non_printable_character_is_refused_naming_field_and_character(name, code):
    with pytest.raises(InvalidArgument) as refused:
        check_workflow_name(name)
    assert refused.value.message.startswith("name: character ")
    assert code in refused.value.message
    assert refused.value.details == [
        {"field": "name", "description": f"non-printable character {code}"}
    ]


def test_a_name_over_the_limit_is_refused_without_repeating_it():
    with pytest.raises(InvalidArgument) as refused:
        check_workflow_name("s3cret" * 100)
    assert (
        refused.value.message == f"name: 600 characters; at most {MAX_WORKFLOW_NAME} are accepted"
    )


def test_a_hold_reason_is_checked_under_its_own_name():
    with pytest.raises(InvalidArgument) as refused:
        check_hold_reason("disk\r\nfull")
    assert refused.value.message.startswith("reason: character 5 (U+000D)")


def test_printable_escapes_what_a_terminal_would_act_on():
    assert printable("a\x1b[31mb\x00c\u202ed\x9be") == "a\\x1b[31mb\\x00c\\u202ed\\x9be"


def test_printable_leaves_printable_text_alone():
    text = "Résumé — größe 日本 ✓ back\\slash"
    assert printable(text) is text


def test_printable_escapes_line_breaks_unless_told_to_keep_them():
    assert printable("one\ntwo") == "one\\ntwo"
    assert printable("one\ntwo\x1b", keep_newlines=True) == "one\ntwo\\x1b"
