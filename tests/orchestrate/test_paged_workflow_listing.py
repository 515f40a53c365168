"""SqlOrchestrateService.list_workflows_page: the keyset-paged listing the Web UI shows."""

from __future__ import annotations

import pytest
from support.workflow_rows import add_workflows

from fuzzball_core.errors import InvalidArgument
from fuzzball_core.vocabulary import Status


def all_pages(service, who, **options):
    """Every page in turn, following the key each page returns."""
    pages, after = [], None
    while True:
        views, after = service.list_workflows_page(who, after=after, **options)
        pages.append([v.id for v in views])
        if after is None:
            return pages


def test_submitted_newest_first_by_default(harness):
    rows = add_workflows(harness.service.sessions, harness.user.account_id, 7)
    views, after = harness.service.list_workflows_page(harness.user, limit=3)
    assert [v.name for v in views] == ["wf-6", "wf-5", "wf-4"]
    assert after == (rows[4].created_at, rows[4].id)


def test_pages_cover_every_workflow_once_in_order(harness):
    rows = add_workflows(harness.service.sessions, harness.user.account_id, 23)
    pages = all_pages(harness.service, harness.user, limit=5)
    assert [len(p) for p in pages] == [5, 5, 5, 5, 3]
    assert [i for p in pages for i in p] == [r.id for r in reversed(rows)]


def test_a_full_last_page_says_it_is_the_last(harness):
    add_workflows(harness.service.sessions, harness.user.account_id, 4)
    _, after = harness.service.list_workflows_page(harness.user, limit=4)
    assert after is None


def test_started_order_puts_never_started_last_when_descending(harness):
    rows = add_workflows(harness.service.sessions, harness.user.account_id, 12)
    ids = [i for p in all_pages(harness.service, harness.user, order="started", limit=4) for i in p]
    expected = sorted(rows, key=lambda r: (r.started_at or 0.0, r.id), reverse=True)
    assert ids == [r.id for r in expected]
    assert {r.id for r in rows if r.started_at is None} == set(ids[-2:])


def test_started_order_ascending(harness):
    rows = add_workflows(harness.service.sessions, harness.user.account_id, 9)
    pages = all_pages(harness.service, harness.user, order="started", ascending=True, limit=2)
    expected = sorted(rows, key=lambda r: (r.started_at or 0.0, r.id))
    assert [i for p in pages for i in p] == [r.id for r in expected]


def test_status_filter_keeps_one_status(harness):
    rows = add_workflows(harness.service.sessions, harness.user.account_id, 10)
    views, _ = harness.service.list_workflows_page(harness.user, status=Status.FAILED)
    assert {v.id for v in views} == {r.id for r in rows if r.status == Status.FAILED}


def test_name_filter_matches_a_part_in_any_case(harness):
    add_workflows(harness.service.sessions, harness.user.account_id, 3, prefix="Train")
    add_workflows(harness.service.sessions, harness.user.account_id, 2, prefix="eval")
    views, _ = harness.service.list_workflows_page(harness.user, name="RAIN")
    assert sorted(v.name for v in views) == ["Train-0", "Train-1", "Train-2"]


def test_name_filter_takes_wildcards_literally(harness):
    add_workflows(harness.service.sessions, harness.user.account_id, 2, prefix="a_b")
    add_workflows(harness.service.sessions, harness.user.account_id, 2, prefix="axb")
    views, _ = harness.service.list_workflows_page(harness.user, name="a_")
    assert sorted(v.name for v in views) == ["a_b-0", "a_b-1"]
    assert harness.service.list_workflows_page(harness.user, name="%")[0] == []


def test_another_accounts_workflows_are_not_listed(harness):
    add_workflows(harness.service.sessions, harness.admin.account_id, 3)
    assert harness.service.list_workflows_page(harness.user) == ([], None)


def test_an_unknown_order_is_refused_naming_it(harness):
    with pytest.raises(InvalidArgument, match="order: must be one of submitted, started"):
        harness.service.list_workflows_page(harness.user, order="name")
