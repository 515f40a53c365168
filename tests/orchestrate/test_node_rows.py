"""The node rows a node list reads (NodeRows): on PostgreSQL only those written since the
last list are read again, and every list is what a list reading every row makes of the same
state, byte for byte, on SQLite and PostgreSQL alike."""

from __future__ import annotations

import operator

import pytest
from sqlalchemy import delete, update
from support.engine_workflows import HELLO

from fuzzball_core.api.node_listing import NodeListBody
from fuzzball_core.orchestrate import node_rows
from fuzzball_core.orchestrate.node_rows import LISTED_NODES, NodeRows, driver_rows
from fuzzball_core.orchestrate.node_usage_copies import NodeUsageCopy, copy_now
from fuzzball_core.orchestrate.nodes import heartbeat
from fuzzball_core.orchestrate.run_owners import RunOwners
from fuzzball_core.orchestrate.service import ListReads
from fuzzball_core.scheduling import Resources
from fuzzball_core.service.views import IN_USE
from fuzzball_core.store.models import Node


def whole_list(harness) -> str:
    """The node list's body as a list that reads every row makes it (a reader of its own)."""
    service = harness.service
    reads = ListReads(service.sessions, service.node_usages, service.audit)
    return NodeListBody().body(reads.list_nodes(harness.admin))


def kept_list(harness, body: NodeListBody) -> str:
    """The node list's body from the harness's service, which keeps its rows between lists."""
    return body.body(harness.service.list_nodes(harness.admin))


def write(harness, statement) -> None:
    with harness.service.sessions() as session, session.begin():
        session.execute(statement)


def read_rows(harness, rows: NodeRows) -> list[tuple]:
    with harness.service.sessions() as session:
        return rows.read(session.connection())


def test_each_list_is_the_list_of_every_row_read_anew(harness):
    body = NodeListBody()
    for name in ("c", "a", "b"):
        harness.node(name, cores=4)
    assert kept_list(harness, body) == whole_list(harness)
    harness.submit(HELLO)  # a node's usage
    assert kept_list(harness, body) == whole_list(harness)
    write(harness, update(Node).where(Node.name == "b").values(last_seen=5.0, status="OFFLINE"))
    assert kept_list(harness, body) == whole_list(harness)
    harness.engine.add_hold("a", "cordon", "admin", "repair", "ops")
    assert kept_list(harness, body) == whole_list(harness)
    harness.engine.register_node("aa", Resources(2, 4 << 30, {"gpu": 1}), {"rack": "7"})
    assert kept_list(harness, body) == whole_list(harness)
    write(harness, update(Node).where(Node.name == "c").values(name="0c"))  # renamed: moves
    assert kept_list(harness, body) == whole_list(harness)
    write(harness, delete(Node).where(Node.name == "aa"))
    assert kept_list(harness, body) == whole_list(harness)
    assert kept_list(harness, body) == whole_list(harness)  # nothing changed since


def test_rows_unchanged_since_the_last_read_are_its_own(harness):
    for name in ("a", "b"):
        harness.node(name)
    rows = NodeRows()
    first = read_rows(harness, rows)
    write(harness, update(Node).where(Node.name == "b").values(last_seen=7.0))
    a, b = read_rows(harness, rows)
    assert b[1:] == ("b", *first[1][2:-1], 7.0)
    if harness.engine.sessions.kw["bind"].dialect.name == "postgresql":
        # read again only on PostgreSQL; the other node's row not read again is the same
        assert a is first[0]


def test_a_read_with_no_row_written_since_is_the_last_reads_list(harness):
    for name in ("a", "b"):
        harness.node(name)
    rows = NodeRows()
    first = read_rows(harness, rows)
    again = read_rows(harness, rows)
    if harness.engine.sessions.kw["bind"].dialect.name == "postgresql":
        assert again is first
    write(harness, update(Node).where(Node.name == "b").values(last_seen=7.0))
    assert read_rows(harness, rows) is not first


@pytest.mark.parametrize("change", ["new", "deleted", "renamed", "long after"])
def test_rows_are_read_whole_again_when_the_kept_ones_cannot_say(harness, monkeypatch, change):
    for name in ("b", "c"):
        harness.node(name)
    rows = NodeRows()
    read_rows(harness, rows)
    if change == "new":
        harness.node("a")
    elif change == "deleted":
        write(harness, delete(Node).where(Node.name == "b"))
    elif change == "renamed":
        write(harness, update(Node).where(Node.name == "c").values(name="a"))
    else:
        monkeypatch.setattr(node_rows, "MOST_BEHIND", 0)
    with harness.service.sessions() as session:
        assert read_rows(harness, rows) == driver_rows(session.connection(), LISTED_NODES)


class _OneCopy:
    """A reader of the engine's memory that is given one copy until told otherwise."""

    def __init__(self, harness) -> None:
        self.engine = harness.engine
        self.copy = self.made()

    def made(self) -> NodeUsageCopy:
        ids = self.engine.context.node_names
        return copy_now(self.engine.context, ids, 0.0, every=True)

    def read(self, node_ids, *, fresh: bool = False, asked: bool = True) -> NodeUsageCopy:
        return self.copy


def test_a_copy_found_to_agree_with_the_same_rows_is_not_checked_again(harness, monkeypatch):
    for name in ("a", "b"):
        harness.node(name)
    checks: list[int] = []
    agrees_with = NodeUsageCopy.agrees_with

    def counted(copy, rows) -> bool:
        checks.append(1)
        return agrees_with(copy, rows)

    monkeypatch.setattr(NodeUsageCopy, "agrees_with", counted)
    service = harness.service
    reads = ListReads(service.sessions, _OneCopy(harness), service.audit)
    first = reads.list_nodes(harness.admin)
    assert reads.list_nodes(harness.admin) == first and len(checks) == 1
    reads.node_usages.copy = reads.node_usages.made()  # a new copy: checked
    reads.list_nodes(harness.admin)
    write(harness, update(Node).where(Node.name == "b").values(last_seen=2e6))  # a row: too
    assert [v.last_seen for v in reads.list_nodes(harness.admin)][1] == 2e6
    assert len(checks) == 3


def test_the_runs_of_the_same_copy_are_labelled_once_a_caller(harness, monkeypatch):
    harness.node("busy", cores=4)
    workflow_id = harness.submit(HELLO)
    lookups: list[int] = []
    of = RunOwners.of

    def counted(owners, session, run_ids):
        lookups.append(len(run_ids))
        return of(owners, session, run_ids)

    monkeypatch.setattr(RunOwners, "of", counted)
    service = harness.service
    reads = ListReads(service.sessions, _OneCopy(harness), service.audit)
    first = reads.list_nodes(harness.admin)
    assert reads.list_nodes(harness.admin) == first and lookups == [1]
    watcher, _ = service.create_account("watcher", kind="monitoring")
    (view,) = reads.list_nodes(watcher)  # another caller: its own labels
    assert (view.stages, lookups) == ((IN_USE,), [1, 1])
    reads.node_usages.copy = reads.node_usages.made()  # a new copy: looked up again
    (view,) = reads.list_nodes(harness.admin)
    assert (view.stages, lookups) == ((f"{workflow_id}/jobs.hello",), [1, 1, 1])


def test_a_list_made_of_what_the_last_was_made_of_is_its_views_in_a_list_of_its_own(harness):
    for name in ("a", "b"):
        harness.node(name)
    first = harness.service.list_nodes(harness.admin)
    kept = list(first)
    first.clear()  # a caller's list is its own
    again = harness.service.list_nodes(harness.admin)
    assert [a is b for a, b in zip(again, kept, strict=True)] == [True, True]


def unheard_reads(harness) -> ListReads:
    """The node lists the list worker makes: its views do not say when a node was last heard
    (the REST list's ListNodeInfo does not show it)."""
    service = harness.service
    return ListReads(service.sessions, service.node_usages, service.audit, last_heard=False)


def heard_again(harness, seconds: float) -> None:
    """``seconds`` later, every node heard from and its lease written to its row."""
    harness.clock.now += seconds
    for node_id in list(harness.engine.context.leases):
        assert heartbeat(harness.engine.context, node_id)
    write(harness, update(Node).values(last_seen=Node.last_seen + seconds))


def test_a_list_without_last_heard_times_is_the_body_of_a_list_reading_every_row(harness):
    for name in ("a", "b"):
        harness.node(name, cores=4)
    harness.submit(HELLO)
    heard_again(harness, 30.0)
    body = NodeListBody().body(unheard_reads(harness).list_nodes(harness.admin))
    assert body == whole_list(harness)


def test_heartbeats_and_leases_written_change_no_view_of_a_list_without_last_heard_times(harness):
    for name in ("a", "b"):
        harness.node(name)
    reads = unheard_reads(harness)
    before = reads.list_nodes(harness.admin)
    heard_again(harness, 30.0)
    after = reads.list_nodes(harness.admin)
    assert all(map(operator.is_, after, before))
    assert [view.last_seen for view in after] == [None, None]
