"""``GET /v3/clusters``: the federation's members with their health and free capacity.

Added to the REST gateway's application by Federate's server (the gateway itself stays the
one Orchestrate serves); the gateway's middleware authenticates the request as for any
other path.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from fuzzball_core.api.rest import BASE_PATH
from fuzzball_federation.needs import GIB
from fuzzball_federation.offers import MemberOffer
from fuzzball_federation.service import FederateService

KIND_ORCHESTRATE = "CLUSTER_KIND_ORCHESTRATE"
READY = "CLUSTER_STATUS_READY"
UNREACHABLE = "CLUSTER_STATUS_UNREACHABLE"


def cluster_json(offer: MemberOffer, address: str) -> dict[str, Any]:
    """One member: name, kind, status, address, labels, ready nodes and free capacity."""
    body: dict[str, Any] = {
        "name": offer.name,
        "kind": KIND_ORCHESTRATE,
        "status": READY if offer.healthy else UNREACHABLE,
        "address": address,
        "labels": dict(offer.labels),
        "nodes": len(offer.nodes),
        "freeCores": offer.free_cores,
        "freeMemoryGb": round(offer.free_memory / GIB, 3),
        "freeDevices": dict(offer.free_devices),
    }
    if offer.problem:
        body["problem"] = offer.problem
    return body


def add_clusters_route(app: web.Application, service: FederateService) -> None:
    """Serve ``GET /v3/clusters`` from ``service``'s members on ``app``."""
    addresses = {member.name: member.config.address for member in service.members}

    async def list_clusters(_request: web.Request) -> web.Response:
        offers = service.offers()
        return web.json_response(
            {"clusters": [cluster_json(o, addresses.get(o.name, "")) for o in offers]}
        )

    app.router.add_get(f"{BASE_PATH}/clusters", list_clusters)
