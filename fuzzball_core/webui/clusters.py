"""Federate's Clusters page: its member clusters with their health, ready nodes, free
capacity and labels (what ``fuzzball cluster list`` shows, from the same
``GET /v3/clusters`` messages). It is Federate's home page: ``/`` leads here."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from aiohttp import web

from fuzzball_core.api.openapi import documented
from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.errors import FailedPrecondition
from fuzzball_core.webui.context import UI
from fuzzball_core.webui.render import html
from fuzzball_core.webui.session import Visitor, page, page_operation

CLUSTERS_PATH = "/clusters"


@dataclass(frozen=True)
class ClusterRow:
    """One member as the page shows it."""

    name: str
    kind: str
    status: str
    problem: str
    address: str
    nodes: int
    free_cores: int
    free_memory_gb: float
    free_devices: tuple[tuple[str, int], ...]
    labels: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, cluster: pb.Cluster) -> ClusterRow:
        """The row of ``cluster``."""
        return cls(
            cluster.name,
            pb.ClusterKind.Name(cluster.kind).removeprefix("CLUSTER_KIND_"),
            pb.ClusterStatus.Name(cluster.status).removeprefix("CLUSTER_STATUS_"),
            cluster.problem,
            cluster.address,
            cluster.nodes,
            cluster.free_cores,
            cluster.free_memory_gb,
            tuple(sorted(cluster.free_devices.items())),
            tuple(sorted(cluster.labels.items())),
        )


@documented(page_operation("Federate's member clusters, with their health and free capacity"))
@page
async def clusters_page(request: web.Request, visitor: Visitor) -> web.StreamResponse:
    """Every member cluster, asked afresh (each member is asked for its nodes)."""
    listing = request.app[UI].clusters
    if listing is None:
        raise FailedPrecondition("this server is not a Federate: it has no member clusters")
    # the members answer at their own pace: never hold up the event loop for them
    clusters = await asyncio.to_thread(listing)
    return html(
        "clusters.html",
        visitor=visitor,
        active=CLUSTERS_PATH,
        clusters=[ClusterRow.of(cluster) for cluster in clusters],
    )


async def home(_request: web.Request) -> web.StreamResponse:
    """Federate's ``/``: the member rollup (the Clusters page)."""
    return web.Response(status=303, headers={"Location": CLUSTERS_PATH})


def add_routes(router: web.UrlDispatcher) -> None:
    """Register the Clusters page, and ``/`` leading to it."""
    router.add_get("/", home)
    router.add_get(CLUSTERS_PATH, clusters_page)
