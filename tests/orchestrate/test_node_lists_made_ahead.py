"""The list worker's node list made ahead of its GETs (WorkerLists.prepare_once): while GETs
come, a new copy of the engine's memory is listed as it arrives, and a GET then shows that
copy, byte for byte the list a read of every row makes of the same state, without asking
the engine for a copy itself, and the rows written since a GET are listed ahead too;
nothing is made ahead while no GET comes."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import update
from support.engine_workflows import HELLO

from fuzzball_core.api.node_listing import NodeListBody
from fuzzball_core.orchestrate import list_worker
from fuzzball_core.orchestrate.list_worker import NODES, WorkerLists
from fuzzball_core.orchestrate.node_usage_copies import NodeUsageCopy, copy_now
from fuzzball_core.orchestrate.service import ListReads
from fuzzball_core.store.models import Node


class Copies:
    """The engine's memory as the worker reads it: a copy made when told, reads counted."""

    def __init__(self, harness) -> None:
        self.context = harness.engine.context
        self.reads = 0
        #: whether each read was asked for by a reader
        self.asked: list[bool] = []
        self.latest = self.made()

    def made(self) -> NodeUsageCopy:
        return copy_now(self.context, self.context.node_names, time.monotonic(), every=True)

    def renew(self) -> None:
        self.latest = self.made()

    def read(self, node_ids, *, fresh: bool = False, asked: bool = True) -> NodeUsageCopy:
        self.reads += 1
        self.asked.append(asked)
        if fresh:
            self.renew()
        return self.latest


@pytest.fixture
def copies(harness) -> Copies:
    harness.node("a", cores=4)
    harness.node("b", cores=4)
    return Copies(harness)


@pytest.fixture
def lists(harness, copies) -> WorkerLists:
    service = harness.service
    return WorkerLists(ListReads(service.sessions, copies, service.audit), service.accounts)


def whole_list(harness) -> str:
    """The node list's body as a list that reads every row makes it (a reader of its own)."""
    service = harness.service
    reads = ListReads(service.sessions, service.node_usages, service.audit)
    return NodeListBody().body(reads.list_nodes(harness.admin))


def assert_the_get_serves_the_list_made_ahead(harness, copies, lists) -> None:
    """A list is made ahead, and the next GET is it (equal to a list that reads every row)
    without asking the engine for a copy."""
    assert lists.prepare_once()
    reads = copies.reads
    assert lists.text(NODES, harness.admin) == (200, whole_list(harness))
    assert copies.reads == reads


def test_a_get_after_a_list_made_ahead_is_it_without_asking_for_a_copy(harness, copies, lists):
    lists.text(NODES, harness.admin)  # a GET: lists are made ahead from now on
    harness.submit(HELLO)
    copies.renew()
    assert_the_get_serves_the_list_made_ahead(harness, copies, lists)


def test_a_list_of_what_the_last_was_made_of_is_not_made_again(harness, copies, lists):
    lists.text(NODES, harness.admin)
    lists.prepare_once()
    assert lists.prepare_once() is False


def test_a_row_written_after_a_get_is_in_the_list_made_ahead(harness, copies, lists):
    lists.text(NODES, harness.admin)
    lists.prepare_once()
    with harness.service.sessions() as session, session.begin():
        session.execute(update(Node).where(Node.name == "b").values(last_seen=2e6))
    assert_the_get_serves_the_list_made_ahead(harness, copies, lists)


def test_a_hold_placed_after_a_list_made_ahead_is_in_the_next_get(harness, copies, lists):
    lists.text(NODES, harness.admin)
    copies.renew()
    lists.prepare_once()
    harness.engine.add_hold("a", "cordon", "admin", "repair", "ops")
    assert lists.text(NODES, harness.admin) == (200, whole_list(harness))


def test_nothing_is_made_ahead_before_a_get(harness, copies, lists):
    lists.text(NODES, harness.admin, unasked=True)  # keep_warm's list is no GET
    reads = copies.reads
    copies.renew()
    assert (lists.prepare_once(), copies.reads) == (False, reads)


def test_nothing_is_made_ahead_long_after_the_last_get(harness, copies, lists, monkeypatch):
    lists.text(NODES, harness.admin)
    reads = copies.reads
    monkeypatch.setattr(list_worker, "PREPARE_WHILE", 0.0)
    copies.renew()
    assert (lists.prepare_once(), copies.reads) == (False, reads)


def test_a_get_long_after_the_last_list_made_ahead_asks_for_the_latest_copy(
    harness, copies, lists, monkeypatch
):
    lists.text(NODES, harness.admin)
    lists.prepare_once()
    monkeypatch.setattr(list_worker, "PREPARED_FOR", -1.0)
    harness.submit(HELLO)
    copies.renew()
    reads = copies.reads
    assert lists.text(NODES, harness.admin) == (200, whole_list(harness))
    assert copies.reads == reads + 1


def test_a_list_made_ahead_after_a_get_reads_as_asked_for_by_a_reader(harness, copies, lists):
    lists.text(NODES, harness.admin)
    lists.prepare_once()
    assert copies.asked[-1] is True


def test_a_list_made_ahead_with_no_get_since_the_last_does_not_read_as_asked_for(
    harness, copies, lists
):
    lists.text(NODES, harness.admin)
    lists.prepare_once()
    lists.prepare_once()
    assert copies.asked[-1] is False
