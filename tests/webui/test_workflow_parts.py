"""The workflows pages' parts without a server: the stage graph's layout, where a field path
is in a file, and the list's page tokens and its paging of a service that lists everything."""

from __future__ import annotations

import pytest

from fuzzball_core.errors import InvalidArgument
from fuzzball_core.service.views import StageView, WorkflowView
from fuzzball_core.webui.spec_lines import line_of
from fuzzball_core.webui.stage_graph import BOX_WIDTH, COLUMN_GAP, MARGIN, stage_graph
from fuzzball_core.webui.workflow_listing import Listing, workflow_page

PIPELINE = """version: v4
images:
  base:
    from:
      uri: docker://alpine:3.19
jobs:
  first:
    image:
      uri: fuzzball://user/base
    command: [echo, one]
  second:
    image:
      uri: docker://alpine:3.19
    command: [echo, two]
    depends-on:
      - name: first
        status: FAILED
"""


def workflow(text: str, *stages: tuple[str, str, str]) -> WorkflowView:
    views = tuple(
        StageView(str(i), "w", name, kind, status) for i, (name, kind, status) in enumerate(stages)
    )
    return WorkflowView("w", "w", "STARTED", "a", 0.0, raw_specification=text, stages=views)


def column_of(graph, name: str) -> int:
    box = next(b for b in graph.boxes if b.stage.name == name)
    return (box.x - MARGIN) // (BOX_WIDTH + COLUMN_GAP)


def test_each_stage_sits_one_column_past_what_it_waits_for() -> None:
    graph = stage_graph(
        workflow(
            PIPELINE,
            ("images.base", "image", "FINISHED"),
            ("jobs.first", "job", "FAILED"),
            ("jobs.second", "job", "STARTED"),
        )
    )
    assert [column_of(graph, n) for n in ("images.base", "jobs.first", "jobs.second")] == [0, 1, 2]


def test_arrows_say_their_kind_and_condition() -> None:
    graph = stage_graph(
        workflow(
            PIPELINE,
            ("images.base", "image", "FINISHED"),
            ("jobs.first", "job", "FAILED"),
            ("jobs.second", "job", "STARTED"),
        )
    )
    assert {(a.source, a.target, a.kind, a.condition) for a in graph.arrows} == {
        ("images.base", "jobs.first", "image", "on-success"),
        ("jobs.first", "jobs.second", "dependency", "on-failure"),
    }


def test_boxes_are_coloured_by_status_and_the_workflow_stage_is_left_out() -> None:
    graph = stage_graph(
        workflow(PIPELINE, ("w", "workflow", "STARTED"), ("jobs.first", "job", "FAILED"))
    )
    assert [(b.stage.name, b.status_class) for b in graph.boxes] == [
        ("jobs.first", "status-failed")
    ]


def test_a_file_that_no_longer_reads_still_shows_its_stages_without_arrows() -> None:
    graph = stage_graph(workflow("version: v4\njobs: 3\n", ("jobs.a", "job", "FINISHED")))
    assert [b.stage.name for b in graph.boxes] == ["jobs.a"] and graph.arrows == ()


def test_a_long_name_is_shortened_in_its_box() -> None:
    graph = stage_graph(workflow("", ("jobs." + "x" * 40, "job", "PENDING")))
    assert graph.boxes[0].label == "x" * 25 + "…"


@pytest.mark.parametrize(
    ("path", "line"),
    [
        ("jobs.second.depends-on[0].status", 17),
        ("jobs.first.command[1]", 10),
        ("images.base.from.uri", 5),
        ("jobs.second (key)", 11),
        ("jobs.second.env", 11),  # absent: the deepest part present
        ("", None),
        ("volumes.data", None),
    ],
)
def test_a_field_path_is_found_at_its_line(path: str, line: int | None) -> None:
    assert line_of(PIPELINE, path) == line


def test_a_key_holding_dots_is_followed_whole() -> None:
    text = "images:\n  docker://a.b/c:1.0:\n    ttl: 3\n"
    assert line_of(text, "images.docker://a.b/c:1.0.ttl") == 3


def test_a_yaml_error_is_placed_at_the_line_the_parser_quotes() -> None:
    assert line_of("jobs: [\n", "", "did not find expected node content (line 2, column 1)") == 2


def test_a_page_token_reads_back_in_its_own_listing() -> None:
    listing = Listing.from_query({"order": "started", "dir": "asc", "name": "x"})
    token = listing.token((12.5, "abc"))
    again = Listing.from_query({"order": "started", "dir": "asc", "name": "x", "page": token})
    assert again.after == (12.5, "abc")


def test_a_page_token_of_another_filter_is_refused() -> None:
    token = Listing.from_query({"name": "x"}).token((1.0, "a"))
    with pytest.raises(InvalidArgument, match="page: the token is for another order or filter"):
        Listing.from_query({"name": "y", "page": token})


def test_the_default_order_needs_no_query() -> None:
    listing = Listing()
    assert listing.url() == "/workflows"
    assert listing.sort_url("submitted") == "/workflows?order=submitted&dir=asc"
    assert listing.sort_url("started") == "/workflows?order=started&dir=desc"


class ListsEverything:
    """A service without a paged listing (as Federate's is)."""

    def __init__(self, views: list[WorkflowView]) -> None:
        self.views = views

    def list_workflows(self, who: object) -> list[WorkflowView]:
        return list(self.views)


def test_a_service_listing_everything_is_paged_the_way_the_keyset_is() -> None:
    views = [
        WorkflowView(f"id-{i:02}", f"wf-{i}", "FINISHED", "a", float(i // 2), started_at=None)
        for i in range(7)
    ]
    service = ListsEverything(views)
    seen, listing = [], Listing()
    while True:
        page = workflow_page(service, None, listing, size=3)  # type: ignore[arg-type]
        seen += [v.id for v in page.workflows]
        if page.next_url is None:
            break
        token = page.next_url.split("page=")[1]
        listing = Listing.from_query({"page": token})
    expected = sorted(views, key=lambda v: (v.created_at, v.id), reverse=True)
    assert seen == [v.id for v in expected]
