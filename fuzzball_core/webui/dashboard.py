"""The dashboard: nodes by hold state, running and pending workflows, recent failures."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from aiohttp import web
from sqlalchemy import ColumnElement, func, select, true

from fuzzball_core.api.openapi import documented
from fuzzball_core.service.views import Principal
from fuzzball_core.store.models import Workflow
from fuzzball_core.vocabulary import Permission, Status
from fuzzball_core.webui.context import UI, WebUi
from fuzzball_core.webui.hold_states import HOLD_STATES, hold_state
from fuzzball_core.webui.render import html
from fuzzball_core.webui.session import Visitor, page, page_operation

RECENT_FAILURES = 5


@dataclass(frozen=True)
class Failure:
    """A failed workflow, as the dashboard lists it."""

    id: str
    name: str
    finished_at: float | None
    error: str


def _visible(who: Principal) -> ColumnElement[bool]:
    # the service's own rule (list_workflows): READ_CLUSTER sees every account's workflows
    if who.may(Permission.READ_CLUSTER):
        return true()
    return Workflow.account_id == who.account_id


def workflow_counts(ui: WebUi, who: Principal) -> dict[str, int]:
    """How many workflows ``who`` sees are running and pending, counted by the store (not a
    page's length)."""
    query = (
        select(Workflow.status, func.count())
        .where(Workflow.status.in_([Status.STARTED.value, Status.PENDING.value]), _visible(who))
        .group_by(Workflow.status)
    )
    with ui.store() as session:
        counts = {status: count for status, count in session.execute(query)}
    return {
        "running": int(counts.get(Status.STARTED.value, 0)),
        "pending": int(counts.get(Status.PENDING.value, 0)),
    }


def recent_failures(ui: WebUi, who: Principal, limit: int = RECENT_FAILURES) -> list[Failure]:
    """The latest failed workflows ``who`` sees, newest first."""
    query = (
        select(Workflow.id, Workflow.name, Workflow.finished_at, Workflow.error)
        .where(Workflow.status == Status.FAILED.value, _visible(who))
        .order_by(Workflow.finished_at.desc(), Workflow.id)
        .limit(limit)
    )
    with ui.store() as session:
        return [
            Failure(id_, name, finished_at, error)
            for id_, name, finished_at, error in session.execute(query)
        ]


def node_counts(ui: WebUi, who: Principal) -> dict[str, int] | None:
    """Nodes by hold state; None when ``who`` may not read nodes."""
    if not who.may(Permission.READ_NODES):
        return None
    states = Counter(hold_state(node) for node in ui.service.list_nodes(who))
    return {state: states.get(state, 0) for state in HOLD_STATES}


@documented(page_operation("the dashboard: nodes by hold state, workflows, recent failures"))
@page
async def dashboard(request: web.Request, visitor: Visitor) -> web.StreamResponse:
    """The dashboard page."""
    ui = request.app[UI]
    return html(
        "dashboard.html",
        visitor=visitor,
        nodes=node_counts(ui, visitor.who),
        workflows=workflow_counts(ui, visitor.who),
        failures=recent_failures(ui, visitor.who),
    )


def add_routes(router: web.UrlDispatcher) -> None:
    """Register the dashboard at ``/``."""
    router.add_get("/", dashboard)
