"""What the Web UI's pages read and act through, handed over by the process serving them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web
from sqlalchemy.orm import Session

from fuzzball_core.service.accounts import Accounts
from fuzzball_core.service.contract import OrchestrateService
from fuzzball_core.service.identity import Identity
from fuzzball_core.service.secrets import Secrets
from fuzzball_core.service.views import Principal


@dataclass(frozen=True)
class EndpointLink:
    """One endpoint the visitor may connect to, as the endpoints page lists it."""

    id: str
    name: str
    url: str
    type: str
    workflow_id: str
    persistent: bool


@dataclass(frozen=True)
class WebUi:
    """The services behind the pages.

    ``sessions`` opens store sessions for the counts the dashboard reads with one query;
    ``endpoints(who)`` lists the endpoints ``who`` may reach (None: this process serves
    none, and the endpoints page says so).
    """

    service: OrchestrateService
    identity: Identity
    accounts: Accounts
    sessions: Callable[[], Session]
    secrets: Secrets | None = None
    endpoints: Callable[[Principal], list[EndpointLink]] | None = None


#: where a page handler finds the :class:`WebUi` (``request.app[UI]``)
UI = web.AppKey("webui", WebUi)
