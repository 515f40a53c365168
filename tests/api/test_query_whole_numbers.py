"""A list's ``pageSize`` and ``pageToken`` as whole numbers (``list_pages.whole_number``): one
reading for every route that pages by position (storage, secrets, provisioner instances)."""

from __future__ import annotations

import pytest

from fuzzball_core.api.list_pages import page_size, whole_number
from fuzzball_core.errors import InvalidArgument


def test_an_absent_or_empty_number_is_zero() -> None:
    assert whole_number({}, "pageToken") == 0
    assert whole_number({"pageToken": ""}, "pageToken") == 0


def test_ascii_digits_are_the_number_they_write() -> None:
    assert whole_number({"pageSize": "007"}, "pageSize") == 7
    assert whole_number({"pageSize": "999999999"}, "pageSize") == 999_999_999


@pytest.mark.parametrize("text", ["²", "١٢", "-1", "+1", " 1", "1.0", "1e3", "1000000000"])
def test_anything_else_is_refused_naming_the_parameter(text: str) -> None:
    with pytest.raises(InvalidArgument, match=r"^pageToken: expected a whole number below"):
        whole_number({"pageToken": text}, "pageToken")


def test_a_page_size_of_zero_is_the_default_and_past_the_most_is_refused() -> None:
    assert page_size({"pageSize": "0"}, 100, 1000) == 100
    with pytest.raises(InvalidArgument, match=r"^pageSize: at most 1000"):
        page_size({"pageSize": "1001"}, 100, 1000)
