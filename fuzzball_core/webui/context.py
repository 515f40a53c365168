"""What the Web UI's pages read and act through, handed over by the process serving them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from aiohttp import web
from sqlalchemy.orm import Session

from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.errors import FailedPrecondition
from fuzzball_core.service.accounts import Accounts
from fuzzball_core.service.contract import OrchestrateService
from fuzzball_core.service.identity import Identity
from fuzzball_core.service.secrets import Secrets
from fuzzball_core.service.views import Principal

T = TypeVar("T")


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
class VolumeEntry:
    """One persistent volume the visitor may use, as the volumes page lists it."""

    reference: str
    storage_class: str
    scope: str
    #: the node holding a node-local volume's data (its name), empty for a shared one
    node: str
    size_bytes: int
    access_time: float | None
    status: str


@dataclass(frozen=True)
class WebUi:
    """The services behind the pages.

    ``sessions`` opens Orchestrate's store sessions for the counts the dashboard reads with
    one query; ``endpoints(who)`` lists the endpoints ``who`` may reach and ``volumes(who)``
    the persistent volumes ``who`` may use (None: this process serves none, and the page
    says so).

    Federate's flavour (:attr:`federate`): no ``identity`` (Federate has no passwords: its
    visitors sign in with an API token), no ``sessions`` (its store holds no nodes or
    Orchestrate workflows), and ``clusters()`` listing its members as ``GET /v3/clusters``
    does; its pages are the clusters, workflows and editor ones.
    """

    service: OrchestrateService
    identity: Identity | None
    accounts: Accounts
    sessions: Callable[[], Session] | None
    secrets: Secrets | None = None
    endpoints: Callable[[Principal], list[EndpointLink]] | None = None
    clusters: Callable[[], list[pb.Cluster]] | None = None
    volumes: Callable[[Principal], list[VolumeEntry]] | None = None
    #: the cookie the endpoint proxy reads a token from (``orchestrate.endpoints.cookie``),
    #: set beside the session's so that Connect reaches a service signed in; "": no proxy
    endpoint_cookie: str = ""
    #: the domain subdomain endpoints are under (``{id}.<domain>``), whose hosts the endpoint
    #: cookie is set for when the Web UI's host is that domain or under it; "": none
    endpoint_domain: str = ""

    @property
    def federate(self) -> bool:
        """Whether these are Federate's pages (its members instead of nodes)."""
        return self.clusters is not None

    async def call(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``function(*args, **kwargs)`` for a page: in a worker thread on Federate, whose
        service calls wait on its members (a slow member then holds up only this page, not
        the listener and its ``/readyz``), inline on Orchestrate, whose service is called
        from its event loop's thread (short database work)."""
        if self.federate:
            return await asyncio.to_thread(function, *args, **kwargs)
        return function(*args, **kwargs)

    def store(self) -> Session:
        """A session of Orchestrate's store, for the pages only Orchestrate serves."""
        if self.sessions is None:
            raise FailedPrecondition("this page reads Orchestrate's store; Federate has none")
        return self.sessions()

    @property
    def nav(self) -> tuple[tuple[str, str], ...]:
        """The main navigation: (path, label) of each page this process serves."""
        return FEDERATE_NAV if self.federate else ORCHESTRATE_NAV


ORCHESTRATE_NAV = (
    ("/", "Dashboard"),
    ("/workflows", "Workflows"),
    ("/nodes", "Nodes"),
    ("/endpoints", "Endpoints"),
    ("/volumes", "Volumes"),
    ("/secrets", "Secrets"),
)
FEDERATE_NAV = (("/clusters", "Clusters"), ("/workflows", "Workflows"))


#: where a page handler finds the :class:`WebUi` (``request.app[UI]``)
UI = web.AppKey("webui", WebUi)
