"""Every by-ID route, through Orchestrate's real REST gateway and gRPC API, keeps one
organization's things from another (and an account's from the organization's other
accounts): it answers 404 exactly as if the thing did not exist. Nodes, holds and the
``/admin`` routes are the cluster administrators' (and the node service accounts'): anyone
else is refused (403 naming the permission).

The routes are a table. ``test_every_routed_path_with_a_parameter_is_in_the_table`` walks the
gateway Orchestrate serves (``server.rest_app``) and fails for any route with a path parameter
that the table does not hold, so a new route cannot go untested.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from support.isolation_stack import NODE_TOKEN, IsolationStack, Owned, absent_id
from support.live_api import HELLO

from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.api.v1 import client_pb2_grpc as pb_grpc
from fuzzball_core.orchestrate.server import rest_app

#: the callers refused acme's things: acme's member (another account of the organization) and
#: globex's owner (another organization)
MEMBER, STRANGER = "acme member", "globex owner"
#: what a refusal is: 404 exactly as for an absent id, or 403 (permission)
ABSENT, DENIED = 404, 403

_VALUE = {"value": {"value": "changed"}}


@dataclass(frozen=True)
class Route:
    """One by-ID route: how acme's thing fills its path, and how each caller is refused.

    ``absent`` names the path parameter replaced by an id nothing has for the "as if absent"
    comparison; ``proof`` is (caller, path) of a read showing that the thing exists and
    survived the refused call (so a 404 was isolation, not absence).
    """

    method: str
    path: str
    ids: Callable[[Owned, Any], dict[str, str]]
    refused: dict[str, int]
    proof: tuple[str, str]
    body: dict[str, Any] | None = None
    query: str = ""
    absent: str = "id"
    #: a Web UI page (at the root, signed in by the session cookie) rather than /v3
    ui: bool = False

    @property
    def key(self) -> str:
        return f"{self.method} {self.path}"


def _workflow(o: Owned, t: Any) -> dict[str, str]:
    return {"id": o.workflow, "workflow": o.workflow}


def _node(o: Owned, t: Any) -> dict[str, str]:
    return {"id": o.node, "holdId": o.hold, "node": o.node, "hold": o.hold}


def _group(o: Owned, t: Any) -> dict[str, str]:
    return {"id": o.group, "userId": t.acme_owner.id}


def _member(o: Owned, t: Any) -> dict[str, str]:
    return {"id": t.acme_member.id}


def _user_image(o: Owned, t: Any) -> dict[str, str]:
    return {"scope": "user", "name": o.image}


def _group_image(o: Owned, t: Any) -> dict[str, str]:
    return {"scope": "group", "name": o.image}


def _endpoint(o: Owned, t: Any) -> dict[str, str]:
    return {"ref": o.endpoint}


def _volume(o: Owned, t: Any) -> dict[str, str]:
    return {"id": o.volume}


def _storage_class(o: Owned, t: Any) -> dict[str, str]:
    return {"id": o.storage_class}


def _storage_driver(o: Owned, t: Any) -> dict[str, str]:
    return {"id": o.storage_driver}


def _provisioner_definition(o: Owned, t: Any) -> dict[str, str]:
    return {"id": o.provisioner_definition}


def _provisioner_instance(o: Owned, t: Any) -> dict[str, str]:
    return {"id": o.provisioner_instance}


def _secret(field: str) -> Callable[[Owned, Any], dict[str, str]]:
    return lambda o, t: {"id": getattr(o, field)}


BOTH_ABSENT = {MEMBER: ABSENT, STRANGER: ABSENT}
BOTH_DENIED = {MEMBER: DENIED, STRANGER: DENIED}
WORKFLOW = ("owner", "/workflows/{id}")
NODE = ("admin", "/nodes/{id}/holds")
GROUP = ("owner", "/accounts/{id}")
MEMBER_PROOF = ("admin", "/admin/users/{id}")
ENDPOINT = ("owner", "/endpoints/{ref}")
VOLUME = ("owner", "/volumes/{id}")
STORAGE_CLASS = ("admin", "/admin/storage-classes/{id}")
STORAGE_DRIVER = ("admin", "/admin/drivers/{id}")
PROVISIONER_DEFINITION = ("admin", "/admin/provisioner/definitions/{id}")
PROVISIONER_INSTANCE = ("admin", "/admin/provisioner/instances/{id}")
_CLASS_BODY = {"class": {"name": "kept", "driver": "local", "properties": {"persistent": True}}}

TABLE = [
    # workflows: the account's
    Route("GET", "/workflows/{id}", _workflow, BOTH_ABSENT, WORKFLOW),
    Route("GET", "/workflows/{id}:status", _workflow, BOTH_ABSENT, WORKFLOW),
    Route("GET", "/workflows/{id}:log", _workflow, BOTH_ABSENT, WORKFLOW),
    Route("GET", "/workflows/{id}:events", _workflow, BOTH_ABSENT, WORKFLOW),
    Route("GET", "/workflows/{id}:why", _workflow, BOTH_ABSENT, WORKFLOW),
    Route("PATCH", "/workflows/{id}:stop", _workflow, BOTH_ABSENT, WORKFLOW),
    # nodes and holds: administrators' and the node service accounts'
    Route("GET", "/nodes/{id}", _node, BOTH_DENIED, NODE),
    Route("DELETE", "/nodes/{id}", _node, BOTH_DENIED, NODE),
    Route("POST", "/nodes/{id}:uncordon", _node, BOTH_DENIED, NODE),
    Route("GET", "/nodes/{id}:events", _node, BOTH_DENIED, NODE),
    Route("GET", "/nodes/{id}/holds", _node, BOTH_DENIED, NODE),
    Route("POST", "/nodes/{id}/holds", _node, BOTH_DENIED, NODE, body={"effect": "cordon"}),
    Route("DELETE", "/nodes/{id}/holds/{holdId}", _node, BOTH_DENIED, NODE),
    # the object cache: user images the account's, group images the organization's
    Route(
        "GET",
        "/objects/{scope}/{name}",
        _user_image,
        BOTH_ABSENT,
        ("owner", "/objects/user/{name}"),
        absent="name",
    ),
    Route(
        "GET",
        "/objects/{scope}/{name}",
        _group_image,
        {STRANGER: ABSENT},
        ("owner", "/objects/group/{name}"),
        absent="name",
    ),
    # endpoints: the account's
    Route("GET", "/endpoints/{ref}", _endpoint, BOTH_ABSENT, ENDPOINT, absent="ref"),
    Route("DELETE", "/endpoints/{ref}", _endpoint, BOTH_ABSENT, ENDPOINT, absent="ref"),
    # volumes: their user's (a group volume: the account's)
    Route("GET", "/volumes/{id}", _volume, BOTH_ABSENT, VOLUME),
    Route("PUT", "/volumes/{id}", _volume, BOTH_ABSENT, VOLUME, body={"volume": {}}),
    Route("PATCH", "/volumes/{id}", _volume, BOTH_ABSENT, VOLUME, body={"volume": {}}),
    Route("DELETE", "/volumes/{id}", _volume, BOTH_ABSENT, VOLUME),
    Route(
        "PATCH",
        "/volumes/{id}:set-status",
        _volume,
        BOTH_ABSENT,
        VOLUME,
        body={"status": "VOLUME_STATUS_DISABLED"},
    ),
    # storage drivers and classes: the cluster administrators'
    Route(
        "GET",
        "/admin/provisioner/definitions/{id}",
        _provisioner_definition,
        BOTH_DENIED,
        PROVISIONER_DEFINITION,
    ),
    Route(
        "POST",
        "/admin/provisioner/definitions/{id}/reset-resource",
        _provisioner_definition,
        BOTH_DENIED,
        PROVISIONER_DEFINITION,
    ),
    Route(
        "GET",
        "/admin/provisioner/instances/{id}",
        _provisioner_instance,
        BOTH_DENIED,
        PROVISIONER_INSTANCE,
    ),
    Route(
        "DELETE",
        "/admin/provisioner/instances/{id}",
        _provisioner_instance,
        BOTH_DENIED,
        PROVISIONER_INSTANCE,
    ),
    Route("GET", "/admin/drivers/{id}", _storage_driver, BOTH_DENIED, STORAGE_DRIVER),
    Route(
        "PUT",
        "/admin/drivers/{id}",
        _storage_driver,
        BOTH_DENIED,
        STORAGE_DRIVER,
        body={"driver": {"name": "local"}},
    ),
    Route("DELETE", "/admin/drivers/{id}", _storage_driver, BOTH_DENIED, STORAGE_DRIVER),
    Route("GET", "/admin/storage-classes/{id}", _storage_class, BOTH_DENIED, STORAGE_CLASS),
    Route(
        "PUT",
        "/admin/storage-classes/{id}",
        _storage_class,
        BOTH_DENIED,
        STORAGE_CLASS,
        body=_CLASS_BODY,
    ),
    Route("DELETE", "/admin/storage-classes/{id}", _storage_class, BOTH_DENIED, STORAGE_CLASS),
    Route(
        "GET", "/admin/storage-classes/{id}:describe", _storage_class, BOTH_DENIED, STORAGE_CLASS
    ),
    Route(
        "PATCH",
        "/admin/storage-classes/{id}:enable",
        _storage_class,
        BOTH_DENIED,
        STORAGE_CLASS,
        body={},
    ),
    Route(
        "PATCH",
        "/admin/storage-classes/{id}:disable",
        _storage_class,
        BOTH_DENIED,
        STORAGE_CLASS,
        body={},
    ),
    # secrets: a user's their own, the organization's its members', the cluster's its admins'
    Route("GET", "/secrets/{id}", _secret("user_secret"), BOTH_ABSENT, ("owner", "/secrets/{id}")),
    Route(
        "PATCH",
        "/secrets/{id}",
        _secret("user_secret"),
        BOTH_ABSENT,
        ("owner", "/secrets/{id}"),
        body=_VALUE,
    ),
    Route(
        "DELETE", "/secrets/{id}", _secret("user_secret"), BOTH_ABSENT, ("owner", "/secrets/{id}")
    ),
    Route(
        "GET",
        "/organization/secrets/{id}",
        _secret("organization_secret"),
        {STRANGER: ABSENT},
        ("owner", "/organization/secrets/{id}"),
    ),
    Route(
        "PATCH",
        "/organization/secrets/{id}",
        _secret("organization_secret"),
        {STRANGER: ABSENT},
        ("owner", "/organization/secrets/{id}"),
        body=_VALUE,
    ),
    Route(
        "DELETE",
        "/organization/secrets/{id}",
        _secret("organization_secret"),
        {STRANGER: ABSENT},
        ("owner", "/organization/secrets/{id}"),
    ),
    Route(
        "GET",
        "/admin/cluster/secrets/{id}",
        _secret("cluster_secret"),
        BOTH_DENIED,
        ("admin", "/admin/cluster/secrets/{id}"),
    ),
    Route(
        "PATCH",
        "/admin/cluster/secrets/{id}",
        _secret("cluster_secret"),
        BOTH_DENIED,
        ("admin", "/admin/cluster/secrets/{id}"),
        body=_VALUE,
    ),
    Route(
        "DELETE",
        "/admin/cluster/secrets/{id}",
        _secret("cluster_secret"),
        BOTH_DENIED,
        ("admin", "/admin/cluster/secrets/{id}"),
    ),
    # the organization's members: its owners'
    Route(
        "PUT",
        "/organization/members/{id}",
        _member,
        {STRANGER: ABSENT},
        MEMBER_PROOF,
        query="?updateRelationship=true&relationship=ORGANIZATION_OWNER",
    ),
    Route("DELETE", "/organization/members/{id}", _member, {STRANGER: ABSENT}, MEMBER_PROOF),
    Route(
        "POST",
        "/organization/members/{id}/password",
        _member,
        {STRANGER: ABSENT},
        MEMBER_PROOF,
        body={"newPassword": "Another-Sturdy-Lantern-43"},
    ),
    # group accounts: their members'
    Route("GET", "/accounts/{id}", _group, BOTH_ABSENT, GROUP),
    Route("PATCH", "/accounts/{id}", _group, BOTH_ABSENT, GROUP, body={"name": "taken"}),
    Route("DELETE", "/accounts/{id}", _group, BOTH_ABSENT, GROUP),
    Route("GET", "/accounts/{id}/members", _group, BOTH_ABSENT, GROUP),
    Route("GET", "/accounts/{id}/token", _group, BOTH_ABSENT, GROUP),
    Route(
        "POST",
        "/accounts/{id}/members",
        _group,
        BOTH_ABSENT,
        GROUP,
        body={"userId": "{userId}", "relationship": "GROUP_MEMBER"},
    ),
    Route(
        "PUT",
        "/accounts/{id}/members",
        _group,
        BOTH_ABSENT,
        GROUP,
        body={"userId": "{userId}", "relationship": "GROUP_MEMBER"},
    ),
    Route("DELETE", "/accounts/{id}/members/{userId}", _group, BOTH_ABSENT, GROUP),
    # the Web UI's pages: the same rules as the API's
    Route(
        "GET", "/workflows/{workflow}", _workflow, BOTH_ABSENT, WORKFLOW, absent="workflow", ui=True
    ),
    Route(
        "GET",
        "/workflows/{workflow}/live",
        _workflow,
        BOTH_ABSENT,
        WORKFLOW,
        absent="workflow",
        ui=True,
    ),
    Route(
        "GET",
        "/workflows/{workflow}/log",
        _workflow,
        BOTH_ABSENT,
        WORKFLOW,
        absent="workflow",
        ui=True,
    ),
    Route(
        "POST",
        "/workflows/{workflow}/stop",
        _workflow,
        BOTH_ABSENT,
        WORKFLOW,
        absent="workflow",
        ui=True,
    ),
    Route(
        "POST",
        "/workflows/{workflow}/rerun",
        _workflow,
        BOTH_ABSENT,
        WORKFLOW,
        absent="workflow",
        ui=True,
    ),
    Route("GET", "/nodes/{node}", _node, BOTH_DENIED, NODE, ui=True),
    Route("POST", "/nodes/{node}/cordon", _node, BOTH_DENIED, NODE, ui=True),
    Route("POST", "/nodes/{node}/evict", _node, BOTH_DENIED, NODE, ui=True),
    Route("POST", "/nodes/{node}/uncordon", _node, BOTH_DENIED, NODE, ui=True),
    Route("POST", "/nodes/{node}/holds/{hold}/release", _node, BOTH_DENIED, NODE, ui=True),
    # users of the whole cluster: its administrators'
    Route("GET", "/admin/users/{id}", _member, BOTH_DENIED, MEMBER_PROOF),
    Route(
        "PATCH",
        "/admin/users/{id}",
        _member,
        BOTH_DENIED,
        MEMBER_PROOF,
        body={"username": "renamed"},
    ),
    Route("DELETE", "/admin/users/{id}", _member, BOTH_DENIED, MEMBER_PROOF),
]

#: routed paths with parameters that are no caller's by-ID resource, and why
NOT_BY_ID = {
    "GET /node-objects/blobs/{digest}": "nodes' own route, the node token only",
    "GET /node-objects/configs/{digest}": "nodes' own route, the node token only",
    "GET /node-objects/manifests/{digest}": "nodes' own route, the node token only",
    "PUT /node-objects/configs/{digest}": "nodes' own route, the node token only",
    "PUT /node-objects/{scope}/{name}": "nodes' own route, the node token only",
    "GET /storage-classes/{id}": "the cluster's storage classes, which every member may use",
    "GET /provisioner/definitions/{id}": "the cluster's node shapes, which every member may read",
    "DELETE /admin/cluster/{id}": (
        "the cluster's own id: a Federate ends its registration with its own token, everyone"
        " else refused (tests/federation/test_registration.py)"
    ),
}


@pytest.fixture(scope="module")
def stack(tmp_path_factory) -> Iterator[IsolationStack]:
    served = IsolationStack(tmp_path_factory.mktemp("isolation"))
    try:
        yield served
    finally:
        served.close()


def _token(stack: IsolationStack, caller: str) -> str:
    tenants = stack.tenants
    return {
        "owner": tenants.acme_owner.token,
        "admin": tenants.admin_token,
        MEMBER: tenants.acme_member.token,
        STRANGER: tenants.globex_owner.token,
    }[caller]


def _fill(text: str, ids: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: ids[m.group(1)], text)


def _body(route: Route, ids: dict[str, str]) -> dict[str, Any] | None:
    if route.body is None:
        return None
    return {k: _fill(v, ids) if isinstance(v, str) else v for k, v in route.body.items()}


def _shown(reply: Any, hidden: str) -> tuple[int, Any]:
    """A reply's status and body with the id it was asked about written ``<id>``."""
    try:
        body: Any = reply.json()
    except ValueError:
        body = reply.text
    return reply.status_code, _without(body, hidden)


def _without(value: Any, hidden: str) -> Any:
    if isinstance(value, str):
        return value.replace(hidden, "<id>")
    if isinstance(value, dict):
        return {k: _without(v, hidden) for k, v in value.items()}
    if isinstance(value, list):
        return [_without(v, hidden) for v in value]
    return value


CASES = [
    pytest.param(route, caller, id=f"{route.key} {route.ids.__name__} as {caller}")
    for route in TABLE
    for caller in route.refused
]


@pytest.mark.parametrize(("route", "caller"), CASES)
def test_a_by_id_route_refuses_acmes_thing_to_others(stack, route, caller):
    ids = route.ids(stack.owned, stack.tenants)
    token = _token(stack, caller)
    call = stack.page if route.ui else stack.call
    path = _fill(route.path, ids) + route.query
    reply = call(token, route.method, path, _body(route, ids))
    if route.refused[caller] == DENIED:
        assert reply.status_code == DENIED, reply.text
        assert "needs the" in reply.text or "may not" in reply.text
    else:
        missing = absent_id()
        twin_ids = {**ids, route.absent: missing}
        twin = call(
            token, route.method, _fill(route.path, twin_ids) + route.query, _body(route, twin_ids)
        )
        assert reply.status_code == ABSENT, reply.text
        assert _shown(reply, ids[route.absent]) == _shown(twin, missing)
    proof_caller, proof_path = route.proof
    proof = stack.call(_token(stack, proof_caller), "GET", _fill(proof_path, ids))
    assert proof.status_code == 200, f"{proof_path}: {proof.text}"


def test_every_routed_path_with_a_parameter_is_in_the_table(stack):
    app = rest_app(stack.orchestrate.orchestrate)
    tabled = {route.key for route in TABLE} | set(NOT_BY_ID)
    routed = set()
    for route in app.router.routes():
        info = route.resource.get_info() if route.resource is not None else {}
        formatter = info.get("formatter")
        if formatter is None or route.method == "HEAD":
            continue  # a plain path: no id to isolate
        routed.add(f"{route.method} {formatter.removeprefix('/v3')}")
    assert sorted(routed - tabled) == []
    # and no row stands for a route that is gone (its 404s would prove nothing)
    assert sorted(tabled - routed) == []


def test_a_group_image_is_shared_with_the_organizations_other_accounts(stack):
    reply = stack.call(stack.tenants.acme_member.token, "GET", "/objects/group/tools")
    assert (reply.status_code, reply.content) == (200, b"an EROFS image")


def test_a_user_image_is_the_accounts_own(stack):
    reply = stack.call(stack.tenants.acme_owner.token, "GET", "/objects/user/tools")
    assert (reply.status_code, reply.content) == (200, b"an EROFS image")


@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("/objects/user/..%2F..", "path: '../..' is not a valid object name"),
        ("/objects/nobody/tools", "path: scope 'nobody' must be one of user, group"),
    ],
)
def test_an_object_path_that_names_no_object_is_refused_naming_the_path(stack, path, words):
    reply = stack.call(stack.tenants.acme_owner.token, "GET", path)
    assert reply.status_code == 400, reply.text
    assert reply.json()["message"] == words


# -- gRPC ---------------------------------------------------------------------------------------


def _metadata(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


GRPC_WORKFLOW_CALLS: list[tuple[str, Callable[[str], Any]]] = [
    ("GetWorkflow", lambda i: pb.WorkflowIdRequest(id=i)),
    ("GetWorkflowStatus", lambda i: pb.WorkflowIdRequest(id=i)),
    ("StopWorkflow", lambda i: pb.WorkflowIdRequest(id=i)),
    ("ListEvents", lambda i: pb.ListEventsRequest(workflow_id=i)),
    ("ReadLogs", lambda i: pb.ReadLogsRequest(workflow_id=i)),
    ("ExplainWorkflow", lambda i: pb.ExplainWorkflowRequest(workflow_id=i)),
]


@pytest.mark.parametrize(("method", "request_of"), GRPC_WORKFLOW_CALLS)
@pytest.mark.parametrize("caller", [MEMBER, STRANGER])
def test_grpc_workflow_calls_answer_not_found_as_if_absent(stack, method, request_of, caller):
    token = _token(stack, caller)
    missing = absent_id()
    with grpc.insecure_channel(stack.grpc_target) as channel:
        call = getattr(pb_grpc.WorkflowServiceStub(channel), method)
        with pytest.raises(grpc.RpcError) as refused:
            call(request_of(stack.owned.workflow), metadata=_metadata(token))
        with pytest.raises(grpc.RpcError) as absent:
            call(request_of(missing), metadata=_metadata(token))
    assert refused.value.code() == grpc.StatusCode.NOT_FOUND
    shown = (refused.value.details() or "").replace(stack.owned.workflow, "<id>")
    assert shown == (absent.value.details() or "").replace(missing, "<id>")


def test_grpc_workflow_calls_name_every_by_id_call(stack):
    """Every WorkflowService call but start, list and validate takes an id: all are above."""
    service = pb.DESCRIPTOR.services_by_name["WorkflowService"]
    by_id = {m.name for m in service.methods} - {
        "StartWorkflow",
        "ListWorkflows",
        "ValidateWorkflow",
        "FollowLogs",  # a stream of ReadLogs, refused the same way before its first chunk
    }
    assert by_id == {name for name, _ in GRPC_WORKFLOW_CALLS}


GRPC_NODE_CALLS: list[tuple[str, Callable[[Owned], Any]]] = [
    ("ListNodes", lambda o: pb.ListNodesRequest()),
    ("GetNode", lambda o: pb.GetNodeRequest(id=o.node)),
    ("RemoveNode", lambda o: pb.NodeIdRequest(node_id=o.node)),
    ("ListNodeHolds", lambda o: pb.NodeIdRequest(node_id=o.node)),
    ("AddNodeHold", lambda o: pb.AddNodeHoldRequest(node_id=o.node, effect="cordon")),
    ("ReleaseNodeHold", lambda o: pb.ReleaseNodeHoldRequest(node_id=o.node, hold_id=1)),
    ("UncordonNode", lambda o: pb.NodeIdRequest(node_id=o.node)),
]


@pytest.mark.parametrize(("method", "request_of"), GRPC_NODE_CALLS)
@pytest.mark.parametrize("caller", [MEMBER, STRANGER])
def test_grpc_node_calls_are_permission_denied_to_users(stack, method, request_of, caller):
    with grpc.insecure_channel(stack.grpc_target) as channel:
        call = getattr(pb_grpc.NodeServiceStub(channel), method)
        with pytest.raises(grpc.RpcError) as refused:
            call(request_of(stack.owned), metadata=_metadata(_token(stack, caller)))
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED


def test_grpc_node_calls_name_every_node_call():
    service = pb.DESCRIPTOR.services_by_name["NodeService"]
    assert {m.name for m in service.methods} == {name for name, _ in GRPC_NODE_CALLS}


# -- cordoning -----------------------------------------------------------------------------------


def test_a_member_cannot_cordon_a_node_over_rest(stack):
    owner = stack.tenants.acme_owner
    reply = stack.call(
        owner.token, "POST", f"/nodes/{stack.owned.node}/holds", {"effect": "cordon"}
    )
    assert reply.status_code == 403
    assert "hold_nodes" in reply.json()["message"]


def test_a_member_cannot_cordon_a_node_over_grpc(stack):
    request = pb.AddNodeHoldRequest(node_id=stack.owned.node, effect="cordon")
    token = stack.tenants.acme_owner.token
    with (
        grpc.insecure_channel(stack.grpc_target) as channel,
        pytest.raises(grpc.RpcError) as no,
    ):
        pb_grpc.NodeServiceStub(channel).AddNodeHold(request, metadata=_metadata(token))
    assert no.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "hold_nodes" in (no.value.details() or "")


def test_the_monitoring_service_account_cordons_a_node_as_monitoring(stack):
    reply = stack.call(
        stack.monitoring, "POST", f"/nodes/{stack.owned.node}/holds", {"effect": "cordon"}
    )
    assert reply.status_code == 200, reply.text
    assert reply.json()["source"] == "monitoring"
    stack.call(stack.monitoring, "DELETE", f"/nodes/{stack.owned.node}/holds/{reply.json()['id']}")


def test_a_refused_cordon_is_in_the_audit_log(stack):
    owner = stack.tenants.acme_owner
    stack.call(owner.token, "POST", f"/nodes/{stack.owned.node}/holds", {"effect": "cordon"})
    entries = stack.call(stack.tenants.admin_token, "GET", "/admin/audit?action=permission_denied")
    assert entries.status_code == 200, entries.text
    assert owner.email in entries.text and "hold_nodes" in entries.text


def test_node_token_routes_refuse_a_users_token(stack):
    reply = stack.call(stack.tenants.acme_owner.token, "GET", "/node-objects/configs/sha256:0")
    assert reply.status_code == 401
    assert NODE_TOKEN not in reply.text


def _submit_using(stack: IsolationStack, token: str, uri: str) -> Any:
    spec = HELLO.replace("docker://alpine:latest", uri)
    return stack.call(token, "POST", "/workflows", {"name": "uses", "rawSpecification": spec})


def test_a_workflow_of_another_organization_cannot_use_a_group_image(stack):
    reply = _submit_using(stack, stack.tenants.globex_owner.token, "fuzzball://group/tools")
    assert reply.status_code == 404
    assert "no image fuzzball://group/tools" in reply.json()["message"]


def test_a_workflow_of_the_organizations_other_account_uses_its_group_image(stack):
    reply = _submit_using(stack, stack.tenants.acme_member.token, "fuzzball://group/tools")
    assert reply.status_code == 200, reply.text


def test_a_cluster_administrator_reads_every_organizations_workflow(stack):
    reply = stack.call(stack.tenants.admin_token, "GET", f"/workflows/{stack.owned.workflow}")
    assert reply.status_code == 200, reply.text


def test_a_group_accounts_workflows_are_its_members_and_nobody_elses(stack):
    owner, member = stack.tenants.acme_owner, stack.tenants.acme_member
    # a group of its own: the table's group must stay one the member is not in
    group = stack.call(owner.token, "POST", "/accounts", {"name": "shared-lab"}).json()["id"]
    added = stack.call(
        owner.token,
        "POST",
        f"/accounts/{group}/members",
        {"userId": member.id, "relationship": "GROUP_MEMBER"},
    )
    assert added.status_code == 200, added.text
    in_group = {
        person: stack.call(person.token, "GET", f"/accounts/{group}/token").json()["token"]
        for person in (owner, member)
    }
    spec = HELLO.replace("docker://alpine:latest", "fuzzball://group/tools")
    started = stack.call(in_group[owner], "POST", "/workflows", {"rawSpecification": spec})
    workflow = started.json()["id"]
    seen_by_member = stack.call(in_group[member], "GET", f"/workflows/{workflow}")
    seen_personally = stack.call(member.token, "GET", f"/workflows/{workflow}")
    seen_by_globex = stack.call(stack.tenants.globex_owner.token, "GET", f"/workflows/{workflow}")
    assert seen_by_member.status_code == 200, seen_by_member.text
    assert (seen_personally.status_code, seen_by_globex.status_code) == (404, 404)
