"""What the workflows list shows: its order, filters and page tokens, read from the URL.

A page is asked of the service's keyset-paged listing (``list_workflows_page``: Orchestrate's
``SqlOrchestrateService``), so the 200th page costs what the first does. A service without
one (Federate proxies its members) is paged here over its whole listing, the same way. A
page token is the (sort key, id) of the last row shown, with the order it belongs to, so a
token from another order or filter is refused rather than misread.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Protocol, runtime_checkable
from urllib.parse import urlencode

from fuzzball_core.errors import InvalidArgument
from fuzzball_core.service.contract import OrchestrateService
from fuzzball_core.service.views import Principal, WorkflowView
from fuzzball_core.spec.names import check_printable
from fuzzball_core.vocabulary import Status

PAGE_SIZE = 50
ORDERS = ("submitted", "started")
#: the longest name filter taken (a workflow name is at most 256 characters)
NAME_FILTER_LIMIT = 256

Key = tuple[float, str]


@runtime_checkable
class PagedWorkflows(Protocol):
    """A service that pages workflows itself (Orchestrate's)."""

    def list_workflows_page(
        self,
        who: Principal,
        *,
        order: str = "submitted",
        ascending: bool = False,
        status: str | None = None,
        name: str | None = None,
        after: Key | None = None,
        limit: int = PAGE_SIZE,
    ) -> tuple[list[WorkflowView], Key | None]:
        """One page and the key the next one starts after (None: the last page)."""


@dataclass(frozen=True)
class Listing:
    """The list as the URL asks for it: ``?order=&dir=&status=&name=&page=``."""

    order: str = "submitted"
    ascending: bool = False
    status: str = ""
    name: str = ""
    after: Key | None = None

    @classmethod
    def from_query(cls, query: Mapping[str, str]) -> Listing:
        """Read the query string; ``InvalidArgument`` naming the parameter that is wrong."""
        order = query.get("order", "submitted")
        if order not in ORDERS:
            raise InvalidArgument(f"order: must be one of {', '.join(ORDERS)}")
        direction = query.get("dir", "desc")
        if direction not in ("asc", "desc"):
            raise InvalidArgument("dir: must be asc or desc")
        status = query.get("status", "")
        if status and status not in Status.__members__:
            raise InvalidArgument(f"status: must be one of {', '.join(Status.__members__)}")
        name = query.get("name", "").strip()
        check_printable("name", name, limit=NAME_FILTER_LIMIT)
        listing = cls(order, direction == "asc", status, name)
        token = query.get("page", "")
        return replace(listing, after=listing._read_token(token)) if token else listing

    @property
    def direction(self) -> str:
        return "asc" if self.ascending else "desc"

    def _scope(self) -> list[str | bool]:
        """What a token is only valid for: the order and the filters."""
        return [self.order, self.ascending, self.status, self.name]

    def token(self, after: Key) -> str:
        """The page token of the page starting after ``after``."""
        text = json.dumps([*self._scope(), after[0], after[1]], separators=(",", ":"))
        return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")

    def _read_token(self, token: str) -> Key:
        try:
            text = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
            *scope, key, last_id = json.loads(text)
        except (binascii.Error, ValueError, TypeError):
            raise InvalidArgument("page: not a page token of this list") from None
        if scope != self._scope():
            raise InvalidArgument("page: the token is for another order or filter; start over")
        if not isinstance(key, int | float) or not isinstance(last_id, str):
            raise InvalidArgument("page: not a page token of this list")
        return float(key), last_id

    def url(self, **changes: object) -> str:
        """``/workflows`` with this listing's query, ``changes`` applied (``page=`` a token);
        a change of order or filter starts again at the first page."""
        values: dict[str, object] = {
            "order": self.order,
            "dir": self.direction,
            "status": self.status,
            "name": self.name,
        }
        values.update(changes)
        query = {k: v for k, v in values.items() if v not in ("", None)}
        if query.get("order") == "submitted" and query.get("dir") == "desc":
            del query["order"], query["dir"]  # the default needs no query
        return "/workflows" + (f"?{urlencode(query)}" if query else "")

    def sort_url(self, order: str) -> str:
        """The link of a column heading: its order, newest first, or flipped if already so."""
        if order == self.order:
            return self.url(order=order, dir="desc" if self.ascending else "asc")
        return self.url(order=order, dir="desc")


@dataclass(frozen=True)
class WorkflowPage:
    """One page of the list and the link to the next (None: the last)."""

    workflows: list[WorkflowView]
    next_url: str | None


def workflow_page(
    service: OrchestrateService, who: Principal, listing: Listing, *, size: int = PAGE_SIZE
) -> WorkflowPage:
    """The page ``listing`` asks for."""
    if isinstance(service, PagedWorkflows):
        views, after = service.list_workflows_page(
            who,
            order=listing.order,
            ascending=listing.ascending,
            status=listing.status or None,
            name=listing.name or None,
            after=listing.after,
            limit=size,
        )
    else:
        views, after = _paged_here(service.list_workflows(who), listing, size)
    next_url = listing.url(page=listing.token(after)) if after is not None else None
    return WorkflowPage(views, next_url)


def sort_key(view: WorkflowView, order: str) -> Key:
    """A workflow's place in ``order`` (as the service's keyset sorts: never started is 0)."""
    value = view.created_at if order == "submitted" else view.started_at or 0.0
    return value, view.id


def _paged_here(
    views: list[WorkflowView], listing: Listing, size: int
) -> tuple[list[WorkflowView], Key | None]:
    """The page of a service that lists everything at once, cut the way the keyset is."""
    wanted = [
        v
        for v in views
        if (not listing.status or v.status == listing.status)
        and listing.name.casefold() in v.name.casefold()
    ]
    wanted.sort(key=lambda v: sort_key(v, listing.order), reverse=not listing.ascending)
    if listing.after is not None:
        after = listing.after
        if listing.ascending:
            wanted = [v for v in wanted if sort_key(v, listing.order) > after]
        else:
            wanted = [v for v in wanted if sort_key(v, listing.order) < after]
    page = wanted[:size]
    more = len(wanted) > size
    return page, sort_key(page[-1], listing.order) if more else None
