"""The Web UI's routes, as extra routes of a process's REST gateway (mounted at ``/``).

The gateway asks for a bearer token everywhere except the paths listed here, which sign
their visitors in with the session cookie instead (:mod:`.session`). ``/v3``, ``/auth`` and
the health paths are the gateway's as before.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from aiohttp import web

from fuzzball_core.api.rest import ExtraRoutes
from fuzzball_core.service.views import Principal
from fuzzball_core.webui import (
    clusters,
    dashboard,
    listings,
    nodes,
    signin,
    workflow_editor,
    workflow_pages,
)
from fuzzball_core.webui.context import UI, WebUi
from fuzzball_core.webui.render import ui_headers

STATIC_DIR = Path(__file__).parent / "static"
#: the pages' exact paths, and the prefixes of the paths beneath them (a workflow's page,
#: a node's, the static files); every one must be a page of this package
UI_PATHS = (
    "/", "/signin", "/signout", "/nodes", "/secrets", "/endpoints", "/volumes", "/workflows",
    "/editor", "/clusters",
)  # fmt: skip
UI_PREFIXES = ("/static/", "/nodes/", "/workflows/", "/editor/")
#: the modules whose ``add_routes(router)`` registers their pages
PAGES = (signin, dashboard, nodes, listings, workflow_pages, workflow_editor)
#: Federate's pages: those that work through the service contract alone, and its members
#: instead of the dashboard and nodes (its store holds neither nodes nor their workflows)
FEDERATE_PAGES = (signin, clusters, workflow_pages, workflow_editor)


def is_ui_path(path: str) -> bool:
    """Whether ``path`` is one of the Web UI's."""
    return path in UI_PATHS or path.startswith(UI_PREFIXES)


async def _ui_response_headers(request: web.Request, response: web.StreamResponse) -> None:
    if is_ui_path(request.path):
        await ui_headers(request, response)


def _add(app: web.Application, ui: WebUi) -> None:
    app[UI] = ui
    for module in FEDERATE_PAGES if ui.federate else PAGES:
        module.add_routes(app.router)
    app.router.add_static("/static/", STATIC_DIR, follow_symlinks=False)
    app.on_response_prepare.append(_ui_response_headers)


def webui_routes(ui: WebUi) -> ExtraRoutes:
    """The Web UI's pages over ``ui``, for the REST gateway's ``extra_routes``."""

    def add(
        app: web.Application, _base: str, _principal: Callable[[web.Request], Principal]
    ) -> None:
        _add(app, ui)

    return ExtraRoutes(add=add, public_paths=UI_PATHS, public_prefixes=UI_PREFIXES)
