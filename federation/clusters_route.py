"""The federation's clusters over REST, shaped as the swagger's ClusterService,
AdminClusterService and AdminClusterRegistrationService:

* ``GET /v3/clusters``, ``GET /v3/cluster/{id}`` (any account): this Federate itself (kind
  ``CLUSTER_KIND_FEDERATE``, ``local``) and every member with its id, kind, status and reason,
  ready nodes and free capacity;
* ``GET /v3/admin/clusters``, ``GET /v3/admin/cluster/{id}`` (``administer_cluster``): the
  same, for administrators;
* ``DELETE /v3/admin/cluster/{id}``: the member leaves (``ClusterIDResponse``), asked to revoke
  the token it gave this Federate; refused while federated workflows run there, the member
  then draining (``registration.py``). With this Federate's own id it is the member side of
  another Federate leaving this one: that Federate, presenting its registration's token,
  has the token revoked;
* ``POST /v3/admin/cluster/registration`` (``RegisterClusterRequest``): a member joins; a
  draining member registered again (same id and name) takes work again;
* ``GET /v3/admin/cluster/registration/configuration:generate[?federateName=&federateJwk=]``:
  this Federate's registration for another Federate to take it as a member.

Added to the REST gateway's application by Federate's server (the gateway itself stays the
one Orchestrate serves); the gateway's middleware authenticates the request as for any other
path. Replies are ``client.proto`` messages in their JSON mapping. A member's status is
CLUSTER_STATUS_READY, CLUSTER_STATUS_UNREACHABLE with the reason (``statusReason``, and
``problem`` as before), or CLUSTER_STATUS_DISABLED with ``statusReason`` ``draining`` (the
swagger's enum has no DRAINING). The API token of a registration is never part of a reply
but ``configuration:generate``'s own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from aiohttp import web
from google.protobuf.timestamp_pb2 import Timestamp

from fuzzball_core.api.json_body import parse_json_body
from fuzzball_core.api.openapi import Operation, Query, documented
from fuzzball_core.api.rest import BASE_PATH, bearer_token
from fuzzball_core.api.rest_messages import to_json
from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.service.forwarded_identity import public_jwk
from fuzzball_core.service.permissions import require
from fuzzball_core.service.views import Principal
from fuzzball_core.vocabulary import Permission
from fuzzball_federation.members import DRAINING, Member
from fuzzball_federation.needs import GIB
from fuzzball_federation.offers import MemberOffer, unreachable_offer
from fuzzball_federation.registration import Registrations, read_labels, read_registration
from fuzzball_federation.service import FederateService

_LIST = Operation("The Federate and its member clusters", pb.ListClustersResponse)
_GET = Operation("One cluster by id", pb.Cluster, tags=("ClusterService",))
_DELETE = Operation("A member leaves the federation", pb.ClusterIDResponse)
_REGISTER = Operation(
    "A member joins the federation",
    pb.RegisterClusterResponse,
    request=pb.RegisterClusterRequest,
    tags=("AdminClusterRegistrationService",),
)
_GENERATE = Operation(
    "This Federate's registration for another Federate (the token in it is shown once)",
    pb.GenerateClusterRegistrationConfigurationResponse,
    query=(
        Query("federateName", "string", "the Federate to trust (its federate.name)"),
        Query("federateJwk", "string", "that Federate's forwarding public key, a JWK"),
    ),
    tags=("AdminClusterRegistrationService",),
)


def _timestamp(seconds: float) -> Timestamp:
    stamp = Timestamp()
    stamp.FromNanoseconds(int(seconds * 1e9))
    return stamp


def cluster_message(offer: MemberOffer, member: Member | None = None) -> pb.Cluster:
    """One member: id, name, kind, status (and why), endpoints, labels, ready nodes and free
    capacity. Its status is the member's own when it is draining or the last poll did not
    reach it, else what asking it for this offer found."""
    status, reason = pb.CLUSTER_STATUS_READY, ""
    if not offer.healthy and offer.problem != DRAINING:
        status, reason = pb.CLUSTER_STATUS_UNREACHABLE, offer.problem or "unreachable"
    elif member is not None and member.unreachable_reason:
        status, reason = pb.CLUSTER_STATUS_UNREACHABLE, member.unreachable_reason
    if member is not None and member.draining:
        status, reason = pb.CLUSTER_STATUS_DISABLED, DRAINING
    message = pb.Cluster(
        name=offer.name,
        kind=pb.CLUSTER_KIND_ORCHESTRATE,
        status=status,
        status_reason=reason,
        labels=dict(offer.labels),
        nodes=sum(shape.count for shape in offer.nodes),
        free_cores=offer.free_cores,
        free_memory_gb=round(offer.free_memory / GIB, 3),
        free_devices=dict(offer.free_devices),
        problem=reason if status == pb.CLUSTER_STATUS_UNREACHABLE else None,
    )
    if member is not None:
        message.id = member.id
        message.kind = pb.ClusterKind.Value(member.kind)
        message.address = message.api_endpoint = member.config.address
        message.openapi_endpoint = member.openapi_endpoint
        message.jwk_public_key = member.jwk_public_key
        message.create_time.CopyFrom(_timestamp(member.created_at))
        message.update_time.CopyFrom(_timestamp(member.updated_at))
    return message


def _api_endpoint(request: web.Request) -> str:
    """The address this request reached Federate at (what it registers itself with)."""
    return f"{request.scheme}://{request.host}"


class ClusterRoutes:
    """The cluster routes over a Federate's service and its registrations."""

    def __init__(self, service: FederateService, registrations: Registrations) -> None:
        self.service = service
        self.registrations = registrations

    def add(self, app: web.Application, principal_of: Callable[[web.Request], Principal]) -> None:
        """Register the routes on ``app`` (under ``/v3``)."""
        self.principal_of = principal_of
        router = app.router
        router.add_get(f"{BASE_PATH}/clusters", self.list_clusters)
        router.add_get(f"{BASE_PATH}/cluster/{{id}}", self.get_cluster)
        router.add_get(f"{BASE_PATH}/admin/clusters", self.admin_list_clusters)
        router.add_get(
            f"{BASE_PATH}/admin/cluster/registration/configuration:generate", self.generate
        )
        router.add_post(f"{BASE_PATH}/admin/cluster/registration", self.register)
        router.add_get(f"{BASE_PATH}/admin/cluster/{{id}}", self.admin_get_cluster)
        router.add_delete(f"{BASE_PATH}/admin/cluster/{{id}}", self.delete_cluster)

    def _admin(self, request: web.Request, doing: str) -> None:
        require(self.principal_of(request), Permission.ADMINISTER_CLUSTER, doing)

    def clusters(self, api_endpoint: str) -> list[pb.Cluster]:
        """This Federate, then every member with its capacity as routing sees it (a draining
        member, which routing no longer considers, with none)."""
        offers = {offer.name: offer for offer in self.service.offers()}
        listed = [self._message(member, offers) for member in self.service.members.snapshot()]
        return [self.local_cluster(api_endpoint, listed), *listed]

    @staticmethod
    def _message(member: Member, offers: dict[str, MemberOffer]) -> pb.Cluster:
        offer = offers.get(member.name) or unreachable_offer(
            member.name, member.config.labels, DRAINING if member.draining else "not asked yet"
        )
        return cluster_message(offer, member)

    def local_cluster(self, api_endpoint: str, members: list[pb.Cluster]) -> pb.Cluster:
        """This Federate as a cluster: READY, its capacity the sum of its ready members'."""
        ready = [m for m in members if m.status == pb.CLUSTER_STATUS_READY]
        devices: dict[str, int] = {}
        for member in ready:
            for kind, count in member.free_devices.items():
                devices[kind] = devices.get(kind, 0) + count
        registrations = self.registrations
        return pb.Cluster(
            id=registrations.id,
            name=registrations.name,
            kind=pb.CLUSTER_KIND_FEDERATE,
            status=pb.CLUSTER_STATUS_READY,
            address=api_endpoint,
            api_endpoint=api_endpoint,
            openapi_endpoint=f"{api_endpoint}{BASE_PATH}/openapi.json",
            nodes=sum(m.nodes for m in ready),
            free_cores=sum(m.free_cores for m in ready),
            free_memory_gb=round(sum(m.free_memory_gb for m in ready), 3),
            free_devices=devices,
            jwk_public_key=public_jwk(registrations.key),
            local=True,
        )

    async def _list(self, request: web.Request) -> web.Response:
        clusters = await asyncio.to_thread(self.clusters, _api_endpoint(request))
        return web.json_response(to_json(pb.ListClustersResponse(clusters=clusters)))

    async def _get(self, request: web.Request) -> web.Response:
        cluster_id = request.match_info["id"]
        api_endpoint = _api_endpoint(request)
        if cluster_id == self.registrations.id:
            clusters = await asyncio.to_thread(self.clusters, api_endpoint)
            return web.json_response(to_json(clusters[0]))
        member = self.service.members.by_id(cluster_id)
        offers = await asyncio.to_thread(self.service.offers)
        message = self._message(member, {offer.name: offer for offer in offers})
        return web.json_response(to_json(message))

    @documented(_LIST)
    async def list_clusters(self, request: web.Request) -> web.Response:
        """``GET /v3/clusters``."""
        self.principal_of(request)
        return await self._list(request)

    @documented(_GET)
    async def get_cluster(self, request: web.Request) -> web.Response:
        """``GET /v3/cluster/{id}``."""
        self.principal_of(request)
        return await self._get(request)

    @documented(_LIST)
    async def admin_list_clusters(self, request: web.Request) -> web.Response:
        """``GET /v3/admin/clusters``."""
        self._admin(request, "list the federation's clusters as an administrator")
        return await self._list(request)

    @documented(_GET)
    async def admin_get_cluster(self, request: web.Request) -> web.Response:
        """``GET /v3/admin/cluster/{id}``."""
        self._admin(request, "read a cluster as an administrator")
        return await self._get(request)

    @documented(_DELETE)
    async def delete_cluster(self, request: web.Request) -> web.Response:
        """``DELETE /v3/admin/cluster/{id}``: the member leaves; with this Federate's own id,
        the Federate this one is a member of leaves it (its registration's token revoked)."""
        cluster_id = request.match_info["id"]
        if cluster_id == self.registrations.id:
            who, token = self.principal_of(request), bearer_token(request)
            ended = await asyncio.to_thread(self.registrations.end, who, token)
            return web.json_response(to_json(pb.ClusterIDResponse(id=ended)))
        self._admin(request, "remove a member cluster")
        left = await asyncio.to_thread(self.registrations.leave, cluster_id)
        return web.json_response(to_json(pb.ClusterIDResponse(id=left)))

    @documented(_REGISTER)
    async def register(self, request: web.Request) -> web.Response:
        """``POST /v3/admin/cluster/registration``: a member joins."""
        self._admin(request, "register a member cluster")
        body = parse_json_body(await request.read())
        fields = read_registration(body)
        labels = read_labels(body)
        member = await asyncio.to_thread(self.registrations.register, fields, labels)
        return web.json_response(to_json(pb.RegisterClusterResponse(id=member.id)))

    @documented(_GENERATE)
    async def generate(self, request: web.Request) -> web.Response:
        """``GET /v3/admin/cluster/registration/configuration:generate``."""
        self._admin(request, "generate a cluster registration")
        config = await asyncio.to_thread(
            lambda: self.registrations.generate(
                _api_endpoint(request),
                federate_name=request.query.get("federateName", ""),
                federate_jwk=request.query.get("federateJwk", ""),
            )
        )
        reply = pb.GenerateClusterRegistrationConfigurationResponse(config=config)
        return web.json_response(to_json(reply), headers={"Cache-Control": "no-store"})
