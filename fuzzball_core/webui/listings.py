"""The secrets page (names, scopes and types; never a value), the endpoints page (a
Connect button per workflow, a menu of its endpoints when it has several) and the volumes
page (persistent volumes with their holding node, size and last use)."""

from __future__ import annotations

from itertools import groupby

from aiohttp import web

from fuzzball_core.api.openapi import documented
from fuzzball_core.service.secrets import Family
from fuzzball_core.vocabulary import Permission
from fuzzball_core.webui.context import UI, EndpointLink
from fuzzball_core.webui.render import html
from fuzzball_core.webui.session import Visitor, page, page_operation

#: the secret families a visitor may list, and the permission each needs
_FAMILIES = (
    (Family.SECRETS, Permission.READ_SECRETS, "Your and your groups' secrets"),
    (Family.ORGANIZATION, Permission.READ_SECRETS, "Organization secrets"),
    (Family.CLUSTER, Permission.ADMINISTER_CLUSTER, "Cluster secrets"),
)


@documented(page_operation("the secrets the visitor may read, by family (never a value)"))
@page
async def secrets_page(request: web.Request, visitor: Visitor) -> web.StreamResponse:
    """Every secret the visitor may read, by family (values are never read here)."""
    store = request.app[UI].secrets
    families = (
        []
        if store is None
        else [
            (title, store.list(visitor.who, family))
            for family, permission, title in _FAMILIES
            if visitor.who.may(permission)
        ]
    )
    return html("secrets.html", visitor=visitor, families=families, served=store is not None)


def connect_groups(links: list[EndpointLink]) -> list[tuple[str, list[EndpointLink]]]:
    """The endpoints a workflow serves, grouped by workflow, by name (a persistent endpoint
    no workflow serves now is not among them: there is nothing to connect to)."""
    served = sorted(
        (link for link in links if link.workflow_id), key=lambda link: (link.workflow_id, link.name)
    )
    return [(key, list(group)) for key, group in groupby(served, lambda link: link.workflow_id)]


@documented(page_operation("the visitor's account's endpoints, a Connect button per workflow"))
@page
async def endpoints_page(request: web.Request, visitor: Visitor) -> web.StreamResponse:
    """The visitor's account's endpoints, with a Connect button (or menu) per workflow."""
    listing = request.app[UI].endpoints
    links = [] if listing is None else listing(visitor.who)
    return html(
        "endpoints.html",
        visitor=visitor,
        groups=connect_groups(links),
        idle=[link for link in links if not link.workflow_id],
        served=listing is not None,
    )


@documented(page_operation("the persistent volumes the visitor may use"))
@page
async def volumes_page(request: web.Request, visitor: Visitor) -> web.StreamResponse:
    """The persistent volumes the visitor may use: theirs and their group's."""
    listing = request.app[UI].volumes
    entries = [] if listing is None else listing(visitor.who)
    return html("volumes.html", visitor=visitor, volumes=entries, served=listing is not None)


def add_routes(router: web.UrlDispatcher) -> None:
    """Register the secrets, endpoints and volumes pages."""
    router.add_get("/secrets", secrets_page)
    router.add_get("/endpoints", endpoints_page)
    router.add_get("/volumes", volumes_page)
