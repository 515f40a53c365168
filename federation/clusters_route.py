"""``GET /v3/clusters``: the federation's members with their health and free capacity.

Added to the REST gateway's application by Federate's server (the gateway itself stays the
one Orchestrate serves); the gateway's middleware authenticates the request as for any
other path. The reply is a ``ListClustersResponse`` of ``client.proto`` in its JSON mapping.
"""

from __future__ import annotations

from aiohttp import web

from fuzzball_core.api.rest import BASE_PATH
from fuzzball_core.api.rest_messages import to_json
from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_federation.needs import GIB
from fuzzball_federation.offers import MemberOffer
from fuzzball_federation.service import FederateService


def cluster_message(offer: MemberOffer, address: str) -> pb.Cluster:
    """One member: name, kind, status, address, labels, ready nodes and free capacity."""
    return pb.Cluster(
        name=offer.name,
        kind=pb.CLUSTER_KIND_ORCHESTRATE,
        status=pb.CLUSTER_STATUS_READY if offer.healthy else pb.CLUSTER_STATUS_UNREACHABLE,
        address=address,
        labels=dict(offer.labels),
        nodes=len(offer.nodes),
        free_cores=offer.free_cores,
        free_memory_gb=round(offer.free_memory / GIB, 3),
        free_devices=dict(offer.free_devices),
        problem=offer.problem or None,
    )


def add_clusters_route(app: web.Application, service: FederateService) -> None:
    """Serve ``GET /v3/clusters`` from ``service``'s members on ``app``."""
    addresses = {member.name: member.config.address for member in service.members}

    async def list_clusters(_request: web.Request) -> web.Response:
        clusters = [cluster_message(o, addresses.get(o.name, "")) for o in service.offers()]
        return web.json_response(to_json(pb.ListClustersResponse(clusters=clusters)))

    app.router.add_get(f"{BASE_PATH}/clusters", list_clusters)
