"""Member capacity kept current for routing: each member's offer, cached and refreshed.

A routing decision reads :meth:`CapacityCache.offers` and asks no member anything: a
background thread asks every member for its nodes (``GET /v3/nodes``), its provisioner
definitions (``GET /v3/provisioner/definitions``) and its storage classes
(``GET /v3/storage-classes``) every ``interval`` seconds (default
:data:`REFRESH_INTERVAL`), as Federate's own account on the member, and keeps the
:class:`~fuzzball_federation.offers.MemberOffer` with the time it was asked. A member the cache
has no offer for yet (it just joined), or whose offer is older than ``max_age`` (the refresher
stopped while Federate was idle, or a member answers slowly), is asked at once, before the
decision. A member that did not answer is an unhealthy offer naming why, until it answers.

The refresher stops itself after ``idle_stop`` seconds without a decision (an idle Federate
polls nobody for capacity) and the next decision starts it again. A member's route for
definitions answering 404 (an Orchestrate without provisioning) means no provisionable
capacity, and its route for storage classes answering 404 (a Federate member) means its
classes are unknown (storage then rejects nothing there); any other failure to read either is
a note on the offer, named in decisions.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol

from fuzzball_core.errors import FuzzballError, NotFound, Unavailable
from fuzzball_federation.offers import MemberOffer, member_offer, unreachable_offer

log = logging.getLogger("fuzzball.federate")

#: seconds between two refreshes of every member's offer
REFRESH_INTERVAL = 2.0
#: the refresher stops after this long without a decision
IDLE_STOP = 120.0
#: definitions (and storage classes) asked per page
DEFINITIONS_PAGE = 100


class _Member(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def config(self) -> Any: ...

    def client(self) -> Any: ...


AskEach = Callable[[Iterable[Any], Callable[[Any], Any]], list[tuple[Any, Any]]]
Problem = Callable[[FuzzballError], str]


def _pages(api: Any, path: str, key: str) -> Iterator[list[dict[str, Any]]]:
    """The items (under ``key``) of each page of a member's paged list route ``path``."""
    token = ""
    while True:
        params = {"pageSize": str(DEFINITIONS_PAGE)}
        if token:
            params["pageToken"] = token
        page = api.call_json("GET", path, params=params)
        yield list(page.get(key) or [])
        following = page.get("pageToken") or ""
        if not following or following == token:
            return
        token = following


def provisioner_definitions(api: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """A member's provisioner definitions (JSON, every page) and notes on what could not be
    read; none without a provisioner (404)."""
    definitions: list[dict[str, Any]] = []
    try:
        for page in _pages(api, "/provisioner/definitions", "definitions"):
            definitions += page
        return definitions, []
    except NotFound:
        return [], []
    except Unavailable:
        raise
    except FuzzballError as exc:
        return definitions, [f"provisioner definitions unreadable ({exc.message})"]


def storage_classes(api: Any) -> tuple[list[dict[str, Any]] | None, list[str]]:
    """A member's storage classes (JSON, every page) and notes on what could not be read;
    None (unknown) from a member that serves no ``/storage-classes`` (404: a Federate, or an
    older Orchestrate) or whose answer failed."""
    try:
        return [c for page in _pages(api, "/storage-classes", "classes") for c in page], []
    except NotFound:
        return None, []
    except Unavailable:
        raise
    except FuzzballError as exc:
        return None, [f"storage classes unreadable ({exc.message})"]


class CapacityCache:
    """The members' offers, asked in the background, read by each decision."""

    def __init__(
        self,
        members: Callable[[], Sequence[_Member]],
        ask_each: AskEach,
        problem: Problem,
        *,
        interval: float = REFRESH_INTERVAL,
        max_age: float | None = None,
        idle_stop: float = IDLE_STOP,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._members = members
        self._ask_each = ask_each
        self._problem = problem
        self.interval = interval
        #: an offer older than this is asked again before a decision uses it
        self.max_age = max_age if max_age is not None else 5 * interval
        self.idle_stop = idle_stop
        self.clock = clock
        self._offers: dict[str, MemberOffer] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_used = 0.0
        #: member asks made (nodes and definitions of one member count one)
        self.asked = 0

    # -- reading ----------------------------------------------------------------------------

    def offers(self) -> list[MemberOffer]:
        """Every current member's offer, in the members' order; those missing or older than
        ``max_age`` are asked first. Starts the refresher if it is not running."""
        members = list(self._members())
        now = self.clock()
        self._last_used = now
        self._ensure_refresher()
        with self._lock:
            due = [
                m
                for m in members
                if m.name not in self._offers
                or now - self._offers[m.name].fetched_at > self.max_age
            ]
        if due:
            self.refresh(due)
        with self._lock:
            return [self._offers[m.name] for m in members if m.name in self._offers]

    def age(self, name: str) -> float | None:
        """Seconds since member ``name``'s offer was asked; None without one."""
        with self._lock:
            offer = self._offers.get(name)
        return None if offer is None else max(0.0, self.clock() - offer.fetched_at)

    # -- asking -----------------------------------------------------------------------------

    def _ask(self, api: Any) -> tuple[Any, list[dict[str, Any]], list[str], Any]:
        nodes = api.list_nodes()
        definitions, notes = provisioner_definitions(api)
        classes, unread = storage_classes(api)
        return nodes, definitions, notes + unread, classes

    def refresh(self, members: Sequence[_Member] | None = None) -> None:
        """Ask ``members`` (every current member by default) for their offers, at once."""
        members = list(self._members()) if members is None else list(members)
        answers = self._ask_each(members, self._ask)
        fresh = {}
        for member, answer in answers:
            labels = dict(getattr(member.config, "labels", {}) or {})
            now = self.clock()
            if isinstance(answer, FuzzballError):
                fresh[member.name] = unreachable_offer(
                    member.name, labels, self._problem(answer), fetched_at=now
                )
            else:
                nodes, definitions, notes, classes = answer
                fresh[member.name] = member_offer(
                    member.name,
                    labels,
                    nodes,
                    definitions,
                    fetched_at=now,
                    notes=notes,
                    storage_classes=classes,
                )
        with self._lock:
            self.asked += len(answers)
            self._offers.update(fresh)
            # a member that left is forgotten
            current = {m.name for m in self._members()}
            for name in set(self._offers) - current:
                del self._offers[name]

    def refresh_soon(self) -> None:
        """Have the refresher ask every member now (work was just sent to one)."""
        self._wake.set()

    # -- the refresher ----------------------------------------------------------------------

    def _ensure_refresher(self) -> None:
        with self._lock:
            if self._thread is not None or self._stop.is_set():
                return
            self._thread = threading.Thread(target=self._run, name="federate-capacity", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        # it waits first: the decision that started it asks the members it lacks itself
        while not self._stop.is_set():
            self._wake.wait(self.interval)
            self._wake.clear()
            with self._lock:
                if self._stop.is_set() or self.clock() - self._last_used > self.idle_stop:
                    self._thread = None
                    return
            try:
                self.refresh()
            except RuntimeError:
                # the service's askers were shut down: Federate is stopping
                break
            except Exception:  # a failed turn must not end the refresher: logged, retried
                log.exception("refreshing member capacity failed")
        with self._lock:
            self._thread = None

    def close(self) -> None:
        """Stop the refresher (for good)."""
        self._stop.set()
        self._wake.set()
        with self._lock:
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=self.interval + 10)
