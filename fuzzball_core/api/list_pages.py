"""Paging of the REST gateway's lists: ``pageSize`` and ``pageToken`` in, the page and the
next page's token out (the swagger's ``List*Response.pageToken``, "" on the last page).

One mechanism for every list: a page is taken from the whole list in its one stable order,
the token says where the next page starts, and a query parameter the route does not
implement (``filter``, ``orderBy`` and the like, which the swagger offers on most lists) is
refused naming it rather than ignored. Lists whose head moves (workflows, newest first) page
by the last item's key, so a workflow started meanwhile neither repeats an item nor hides
one; the others by position.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TypeVar

from fuzzball_core.errors import InvalidArgument

T = TypeVar("T")

#: the query parameters of a paged list
PAGE_PARAMETERS = ("pageSize", "pageToken")
#: how many items a page holds when the caller names no ``pageSize``, and the most
DEFAULT_PAGE, MAX_PAGE = 100, 1000
#: what a refused parameter's message says (each list has one order)
_ONE_ORDER = "not supported; lists come in one order"


def refuse_unknown(
    query: Mapping[str, str], known: Collection[str] = PAGE_PARAMETERS, *, why: str = _ONE_ORDER
) -> None:
    """InvalidArgument naming the first query parameter not in ``known``, saying ``why``."""
    for name in query:
        if name not in known:
            raise InvalidArgument(f"{name}: {why}")


def refuse(query: Mapping[str, str], names: Collection[str], *, why: str = _ONE_ORDER) -> None:
    """InvalidArgument naming the first of ``names`` the query gives (not empty)."""
    for name in names:
        if query.get(name):
            raise InvalidArgument(f"{name}: {why}")


def whole_number(query: Mapping[str, str], name: str) -> int:
    """The query parameter ``name`` as a whole number below 10^9 (0 when absent or empty);
    InvalidArgument naming it for anything else: ASCII digits only ("²" is a digit to
    ``isdigit``, not to ``int``), and few enough for any page or position."""
    value = query.get(name, "")
    if not value:
        return 0
    if not (value.isascii() and value.isdigit() and len(value) <= 9):
        raise InvalidArgument(
            f"{name}: expected a whole number below 1,000,000,000, got {value[:40]!r}"
        )
    return int(value)


def page_size(query: Mapping[str, str], default: int, most: int) -> int:
    """The ``pageSize`` query parameter: ``default`` when absent or 0, at most ``most``."""
    size = whole_number(query, "pageSize")
    if size > most:
        raise InvalidArgument(f"pageSize: at most {most}")
    return size or default


def paged(
    query: Mapping[str, str],
    items: Sequence[T],
    *,
    default: int = DEFAULT_PAGE,
    most: int = MAX_PAGE,
) -> tuple[Sequence[T], str]:
    """The page of ``items`` (in their one order) the query asks for, and the next page's
    token ("": none); the token is the position of the next item. ``orderBy`` and
    ``filter`` are refused naming them."""
    refuse(query, ("orderBy", "filter"))
    size = page_size(query, default, most)
    token = query.get("pageToken", "")
    if token and not (token.isascii() and token.isdigit() and len(token) <= 9):
        raise InvalidArgument(f"pageToken: {token[:40]!r} is not a page token of this list")
    start = int(token or 0)
    page = items[start : start + size]
    return page, str(start + size) if start + size < len(items) else ""


def keyed_page(
    query: Mapping[str, str],
    items: Sequence[T],
    key: Callable[[T], tuple[float, str]],
    *,
    default: int = DEFAULT_PAGE,
    most: int = MAX_PAGE,
) -> tuple[list[T], str]:
    """The page of ``items`` the query asks for, ordered by ``key`` descending (newest
    first, ties by id), starting after the item whose key the ``pageToken`` holds; and the
    next page's token ("": none)."""
    size = page_size(query, default, most)
    ordered = sorted(items, key=key, reverse=True)
    token = query.get("pageToken", "")
    if token:
        after = _token_key(token)
        ordered = [item for item in ordered if key(item) < after]
    page = ordered[:size]
    if len(ordered) <= size:
        return page, ""
    last = key(page[-1])
    return page, base64.urlsafe_b64encode(json.dumps(list(last)).encode()).decode("ascii")


def _token_key(token: str) -> tuple[float, str]:
    """The key a :func:`keyed_page` token holds; InvalidArgument when it holds none."""
    refused = InvalidArgument(f"pageToken: {token[:40]!r} is not a page token of this list")
    if len(token) > 512 or not token.isascii():
        raise refused
    try:
        found = json.loads(base64.urlsafe_b64decode(token.encode("ascii")))
    except (binascii.Error, ValueError):
        raise refused from None
    if not (
        isinstance(found, list)
        and len(found) == 2
        and isinstance(found[0], int | float)
        and not isinstance(found[0], bool)
        and isinstance(found[1], str)
    ):
        raise refused
    return float(found[0]), found[1]
