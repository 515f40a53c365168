"""The workflows pages: the list, a workflow's detail (stage graph, stages with their nodes
and estimated starts, events, logs) and its stop and rerun actions.

The detail page's stages and events refresh in place (htmx, every few seconds while the
workflow runs); its log pane is fed by ``static/workflows.js`` from the ``/log`` route,
page by page, with inline search and a Follow toggle.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from sqlalchemy import select

from fuzzball_core.api.openapi import Body, FormOperation, Query, documented
from fuzzball_core.errors import InvalidArgument
from fuzzball_core.service.contract import LOG_PAGE
from fuzzball_core.service.permissions import require
from fuzzball_core.service.views import TERMINAL, StageExplanation, StageView, WorkflowView
from fuzzball_core.spec.names import check_printable
from fuzzball_core.store.models import Node
from fuzzball_core.vocabulary import Permission, Status
from fuzzball_core.webui.context import UI, WebUi
from fuzzball_core.webui.render import html
from fuzzball_core.webui.session import CSRF_FORM_FIELD, Visitor, page, page_operation
from fuzzball_core.webui.stage_graph import stage_graph
from fuzzball_core.webui.workflow_listing import (
    NAME_FILTER_LIMIT,
    ORDERS,
    Listing,
    workflow_page,
)

#: how often a running workflow's stages and events refresh, and its log is read
REFRESH_SECONDS = 2
#: what a workflow id may look like (a UUID here, a member-prefixed one at a Federate);
#: anything else is not looked up (a database refuses a NUL in a query)
WORKFLOW_ID = r"[0-9A-Za-z._:-]{1,64}"
#: the longest stage name the log pane asks for (``jobs.`` and a name of at most 256)
MAX_STAGE_NAME = 300


@dataclass(frozen=True)
class StageRow:
    """A stage as the detail page's table shows it."""

    name: str
    kind: str
    status: str
    nodes: tuple[str, ...]
    exit_code: int | None
    attempt: int
    started_at: float | None
    finished_at: float | None
    message: str
    #: why it waits and when it may start (pending stages only)
    why: StageExplanation | None
    #: a task array's progress ("3 finished, 1 failed, 2 running of 10"); empty otherwise
    tasks: str = ""


@documented(
    page_operation(
        "the workflows list, a page at a time",
        Query("order", "string", "the time sorted by", choices=ORDERS),
        Query("dir", "string", "ascending or descending (default)", choices=("asc", "desc")),
        Query(
            "status", "string", "only workflows of this status", choices=("", *Status.__members__)
        ),
        Query(
            "name", "string", f"only workflows whose name holds this (at most {NAME_FILTER_LIMIT})"
        ),
        Query("page", "string", "the token of the page: the list's own next-page link"),
    )
)
@page
async def workflow_list(request: web.Request, visitor: Visitor) -> web.StreamResponse:
    """The workflows list: Submitted newest first unless the query says otherwise."""
    listing = Listing.from_query(request.query)
    ui = request.app[UI]
    shown = await ui.call(workflow_page, ui.service, visitor.who, listing)
    return html(
        "workflows.html",
        visitor=visitor,
        active="/workflows",
        listing=listing,
        page=shown,
        statuses=list(Status.__members__),
    )


def _node_names(ui: WebUi, node_ids: Iterable[str]) -> dict[str, str]:
    """The names of the nodes a visitor's own workflow ran on (``workflow why`` names them
    to the workflow's owner too; reading every node is not needed for that)."""
    wanted = set(node_ids)
    if not wanted or ui.sessions is None:  # Federate's store has no nodes: ids shown
        return {}
    with ui.sessions() as session:
        rows = session.execute(select(Node.id, Node.name).where(Node.id.in_(wanted)))
        return {node_id: name for node_id, name in rows}


def _detail(ui: WebUi, visitor: Visitor, workflow_id: str) -> dict[str, Any]:
    """What the detail page and its refreshing part show."""
    workflow = ui.service.get_workflow(visitor.who, workflow_id)
    names = _node_names(ui, (n for s in workflow.stages for n in s.node_ids))
    waiting = {
        e.stage_name: e
        for e in ui.service.explain_workflow(visitor.who, workflow_id)
        if e.status == Status.PENDING
    }
    rows = [
        StageRow(
            s.name,
            s.kind,
            s.status,
            tuple(names.get(n, n) for n in s.node_ids),
            s.exit_code,
            s.attempt,
            s.started_at,
            s.finished_at,
            s.message,
            waiting.get(s.name),
            _task_progress(s),
        )
        for s in workflow.stages
    ]
    return {
        "visitor": visitor,
        "workflow": workflow,
        "running": workflow.status not in TERMINAL,
        # Stop and Rerun are offered only where the server would not refuse them
        "controls": ui.service.lacks_to_control_workflow(visitor.who, workflow_id) is None,
        "graph": stage_graph(workflow),
        "stages": rows,
        "nodes_used": sorted({n for row in rows for n in row.nodes}),
        "events": ui.service.list_events(visitor.who, workflow_id),
        "refresh": REFRESH_SECONDS,
    }


def _task_progress(stage: StageView) -> str:
    if stage.task_count is None:
        return ""
    return (
        f"{stage.tasks_finished} finished, {stage.tasks_failed} failed, "
        f"{stage.tasks_running} running of {stage.task_count} tasks"
    )


def _log_stages(workflow: WorkflowView) -> list[str]:
    """The stages whose output the log pane can narrow to (jobs, services, builds)."""
    return [s.name for s in workflow.stages if s.kind in ("job", "service", "image")]


@documented(page_operation("a workflow's page: stage graph, stages, events and log pane"))
@page
async def workflow_detail(request: web.Request, visitor: Visitor) -> web.StreamResponse:
    """A workflow's page."""
    ui = request.app[UI]
    detail = await ui.call(_detail, ui, visitor, request.match_info["workflow"])
    return html(
        "workflow.html",
        active="/workflows",
        log_stages=_log_stages(detail["workflow"]),
        **detail,
    )


@documented(page_operation("the refreshing part of a workflow's page (an HTML fragment)"))
@page
async def workflow_live(request: web.Request, visitor: Visitor) -> web.StreamResponse:
    """The refreshing part of a workflow's page (htmx swaps it in)."""
    ui = request.app[UI]
    detail = await ui.call(_detail, ui, visitor, request.match_info["workflow"])
    return html("workflow_live.html", **detail)


def _int_query(request: web.Request, name: str, default: int) -> int:
    text = request.query.get(name, "")
    if not text:
        return default
    if not (text.isascii() and text.isdigit()) or len(text) > 18:  # "²" is a digit to isdigit
        raise InvalidArgument(f"{name}: must be a whole number of at most 18 digits")
    return int(text)


#: one page of a workflow's output, as ``workflow_log`` answers it
_LOG_PAGE = {
    "type": "object",
    "properties": {
        "chunks": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "seq": {"type": "integer"},
                    "stage": {"type": "string"},
                    "stream": {"type": "string"},
                    "data": {"type": "string"},
                },
                "required": ["seq", "stage", "stream", "data"],
            },
        },
        "more": {"type": "boolean"},
    },
    "required": ["chunks", "more"],
}


@documented(
    page_operation(
        "one page of a workflow's output, for the log pane",
        Query("stage", "string", f"only this stage's output (at most {MAX_STAGE_NAME})"),
        Query("after", "string", "the chunks after this seq: a whole number of at most 18 digits"),
        reply=Body("application/json", "the chunks, and whether more may come", _LOG_PAGE),
    )
)
@page
async def workflow_log(request: web.Request, visitor: Visitor) -> web.StreamResponse:
    """One page of a workflow's output as JSON, for the log pane: the chunks after
    ``?after=SEQ`` (of ``?stage=NAME`` only, if given), and whether more may come."""
    ui = request.app[UI]
    workflow_id = request.match_info["workflow"]
    stage = check_printable("stage", request.query.get("stage", ""), limit=MAX_STAGE_NAME) or None
    # read the status first: output stored before a workflow ended is all on its pages
    workflow = await ui.call(ui.service.get_workflow, visitor.who, workflow_id)
    ended = workflow.status in TERMINAL
    chunks = await ui.call(
        ui.service.read_logs,
        visitor.who,
        workflow_id,
        stage_name=stage,
        after_seq=_int_query(request, "after", 0),
        limit=LOG_PAGE,
    )
    return web.json_response(
        {
            "chunks": [
                {"seq": c.seq, "stage": c.stage_name, "stream": c.stream, "data": c.data}
                for c in chunks
            ],
            # the client reads on at once while pages come full, and stops once it is over
            "more": bool(chunks) or not ended,
        }
    )


@documented(FormOperation("stop the workflow", "to the workflow's page", (CSRF_FORM_FIELD,)))
@page
async def stop(request: web.Request, visitor: Visitor) -> web.StreamResponse:
    """Stop the workflow, then show its page."""
    workflow_id = request.match_info["workflow"]
    ui = request.app[UI]
    await ui.call(ui.service.stop_workflow, visitor.who, workflow_id)
    return web.Response(status=303, headers={"Location": f"/workflows/{workflow_id}"})


@documented(
    FormOperation(
        "start the workflow's file again under its name",
        "to the new run's page",
        (CSRF_FORM_FIELD,),
    )
)
@page
async def rerun(request: web.Request, visitor: Visitor) -> web.StreamResponse:
    """Start the workflow's file again under the very same name, then show the new run.
    Whoever may stop the workflow may rerun it (the service's ``lacks_to_control_workflow``
    says who): another account's workflow, shown by the read-only READ_CLUSTER, reruns only
    for one who administers the cluster."""
    ui = request.app[UI]
    service = ui.service
    workflow = await ui.call(service.get_workflow, visitor.who, request.match_info["workflow"])
    lacking = await ui.call(service.lacks_to_control_workflow, visitor.who, workflow.id)
    if lacking is Permission.ADMINISTER_CLUSTER:
        require(visitor.who, lacking, f"rerun workflow {workflow.id}")
    # one lacking RUN_WORKFLOWS is refused by the start below, which audits the refusal
    if not workflow.raw_specification:
        raise InvalidArgument(f"workflow {workflow.id}: its file is not kept, so it cannot rerun")
    started = await service.start_workflow_async(
        visitor.who, raw_specification=workflow.raw_specification, name=workflow.name
    )
    return web.Response(status=303, headers={"Location": f"/workflows/{started.id}"})


def add_routes(router: web.UrlDispatcher) -> None:
    """Register the workflows pages and their actions."""
    one = f"/workflows/{{workflow:{WORKFLOW_ID}}}"
    router.add_get("/workflows", workflow_list)
    router.add_get(one, workflow_detail)
    router.add_get(f"{one}/live", workflow_live)
    router.add_get(f"{one}/log", workflow_log)
    router.add_post(f"{one}/stop", stop)
    router.add_post(f"{one}/rerun", rerun)
