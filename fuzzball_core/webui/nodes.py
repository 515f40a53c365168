"""The nodes pages: the list (status, holds, resources; sortable and filterable) and a
node's detail (its holds and event log), with cordon, uncordon, evict and release actions
for visitors who may place holds. The service refuses everyone else anyway; the buttons are
only not shown to them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from fuzzball_core.api.form_body import read_form
from fuzzball_core.api.openapi import FormField, FormOperation, Query, documented
from fuzzball_core.errors import InvalidArgument
from fuzzball_core.service.views import NodeView
from fuzzball_core.vocabulary import Permission
from fuzzball_core.webui.context import UI
from fuzzball_core.webui.hold_states import HOLD_STATES, hold_state
from fuzzball_core.webui.render import html
from fuzzball_core.webui.session import CSRF_FORM_FIELD, Visitor, page, page_operation

#: the list's sortable columns and the key each sorts by (ties: by name)
SORTS: dict[str, Callable[[NodeView], Any]] = {
    "name": lambda node: node.name,
    "status": lambda node: node.status,
    "state": lambda node: HOLD_STATES.index(hold_state(node)),
    "holds": lambda node: len(node.holds),
    "cores": lambda node: node.cores,
    "memory": lambda node: node.memory,
}
#: how long a hold's reason may be
MAX_REASON = 500
#: the field of every action's form saying which page to go back to
BACK_FIELD = FormField(
    "back",
    {"type": "string"},
    "the page to go back to: /nodes, with its query if any; otherwise the node's page",
)
_BACK = "back to the page the form was on (the field back)"


def _query_choice(request: web.Request, name: str, choices: tuple[str, ...], default: str) -> str:
    value = request.query.get(name, default)
    if value not in choices:
        raise InvalidArgument(f"{name}: must be one of {', '.join(choices)}")
    return value


def _listing(request: web.Request, visitor: Visitor) -> dict[str, Any]:
    sort = _query_choice(request, "sort", tuple(SORTS), "name")
    order = _query_choice(request, "order", ("asc", "desc"), "asc")
    state = _query_choice(request, "state", ("", *HOLD_STATES), "")
    text = request.query.get("q", "").strip().lower()
    listed = request.app[UI].service.list_nodes(visitor.who)
    shown = [
        node
        for node in listed
        if (not state or hold_state(node) == state)
        and (not text or text in node.name.lower() or text in node.id.lower())
    ]
    shown.sort(key=lambda node: node.name)
    shown.sort(key=SORTS[sort], reverse=order == "desc")
    return {
        "nodes": [(node, hold_state(node)) for node in shown],
        "total": len(listed),
        "sort": sort,
        "order": order,
        "state": state,
        "q": request.query.get("q", ""),
        "states": HOLD_STATES,
        "may_hold": visitor.who.may(Permission.HOLD_NODES),
    }


@documented(
    page_operation(
        "every node, filtered and sorted as the query says",
        Query("sort", "string", "the column sorted by (ties: by name)", choices=tuple(SORTS)),
        Query("order", "string", "ascending or descending", choices=("asc", "desc")),
        Query("state", "string", "only the nodes in this hold state", choices=("", *HOLD_STATES)),
        Query("q", "string", "only the nodes whose name or id holds this text (any case)"),
    )
)
@page
async def node_list(request: web.Request, visitor: Visitor) -> web.StreamResponse:
    """Every node, filtered and sorted as the query says."""
    return html("nodes.html", visitor=visitor, **_listing(request, visitor))


@documented(page_operation("one node: resources, holds and event log"))
@page
async def node_detail(request: web.Request, visitor: Visitor) -> web.StreamResponse:
    """One node: resources, holds and event log."""
    service = request.app[UI].service
    node = service.get_node(visitor.who, request.match_info["node"])
    events = service.list_node_events(visitor.who, node.id)
    return html(
        "node.html",
        visitor=visitor,
        node=node,
        state=hold_state(node),
        events=list(reversed(events)),  # newest first
        may_hold=visitor.who.may(Permission.HOLD_NODES),
    )


async def _reason(request: web.Request) -> str:
    reason = str((await read_form(request)).get("reason", "")).strip()
    if len(reason) > MAX_REASON:
        raise InvalidArgument(f"reason: at most {MAX_REASON} characters")
    return reason


async def _back(request: web.Request, node_id: str) -> web.StreamResponse:
    # back to the page the form was on: the list (with its filters) or the node's page
    back = str((await read_form(request)).get("back", ""))
    if not (back.startswith("/nodes?") or back == "/nodes"):
        back = f"/nodes/{node_id}"
    return web.Response(status=303, headers={"Location": back})


def _placing(effect: str) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def place(request: web.Request, visitor: Visitor) -> web.StreamResponse:
        node_id = request.match_info["node"]
        service = request.app[UI].service
        service.add_hold(visitor.who, node_id, effect, await _reason(request))
        return await _back(request, node_id)

    place.__doc__ = f"Place a {effect} hold on the node."
    reason = FormField(
        "reason",
        {"type": "string", "maxLength": MAX_REASON},
        "why (surrounding blanks are dropped)",
    )
    form = FormOperation(
        f"place a hold on the node ({effect})",
        _BACK,
        (reason, BACK_FIELD, CSRF_FORM_FIELD),
    )
    return documented(form)(page(place))


@documented(
    FormOperation(
        "release the node's administrator cordon holds", _BACK, (BACK_FIELD, CSRF_FORM_FIELD)
    )
)
@page
async def uncordon(request: web.Request, visitor: Visitor) -> web.StreamResponse:
    """Release the node's administrator cordon holds."""
    node_id = request.match_info["node"]
    request.app[UI].service.uncordon(visitor.who, node_id)
    return await _back(request, node_id)


@documented(FormOperation("release one hold of the node", _BACK, (BACK_FIELD, CSRF_FORM_FIELD)))
@page
async def release(request: web.Request, visitor: Visitor) -> web.StreamResponse:
    """Release one hold of the node."""
    node_id = request.match_info["node"]
    request.app[UI].service.release_hold(visitor.who, node_id, int(request.match_info["hold"]))
    return await _back(request, node_id)


def add_routes(router: web.UrlDispatcher) -> None:
    """Register the nodes pages and their actions."""
    router.add_get("/nodes", node_list)
    router.add_get("/nodes/{node:[^/]+}", node_detail)
    router.add_post("/nodes/{node:[^/]+}/cordon", _placing("cordon"))
    router.add_post("/nodes/{node:[^/]+}/evict", _placing("evict"))
    router.add_post("/nodes/{node:[^/]+}/uncordon", uncordon)
    router.add_post("/nodes/{node:[^/]+}/holds/{hold:[0-9]{1,18}}/release", release)
