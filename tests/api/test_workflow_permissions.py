"""Starting and stopping workflows needs the run_workflows permission, over REST and gRPC:
the cluster's monitoring and provisioner service accounts (whose tokens sit in Prometheus's
and Alertmanager's configuration) hold nodes but run nothing. Before, any authenticated
caller could start a workflow, so those tokens ran arbitrary containers.

READ_CLUSTER shows every account's workflows, read only: stopping another account's workflow
needs administer_cluster as well (the cluster administrators and the ``admin`` service account
hold both)."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import httpx
import pytest
from support.live_api import HELLO, Stack

from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.api.v1 import client_pb2_grpc as pb_grpc
from fuzzball_core.errors import PermissionDenied
from fuzzball_core.service.audit import AuditQuery
from fuzzball_core.service.views import CANCELED, Principal
from fuzzball_core.vocabulary import Permission

PERMISSION_DENIED = 7


def call(stack: Stack, method: str, path: str, token: str, **kwargs) -> httpx.Response:
    return httpx.request(
        method,
        f"{stack.servers.rest_url}/v3{path}",
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
        **kwargs,
    )


def refused(response: httpx.Response) -> str:
    """The message of a 403 PERMISSION_DENIED answer."""
    assert response.status_code == 403, response.text
    assert response.json()["code"] == PERMISSION_DENIED
    return response.json()["message"]


@pytest.fixture(params=["monitoring", "provisioner"])
def node_service_token(stack: Stack, request: pytest.FixtureRequest) -> str:
    """A token of a node service account (monitoring or provisioner)."""
    return stack.service.create_account(request.param, kind=request.param)[1]


@pytest.fixture
def channel(stack: Stack) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(stack.servers.grpc_target) as open_channel:
        yield open_channel


@pytest.fixture
def administrator(stack: Stack) -> Principal:
    """The ``admin`` service account: reads every workflow and administers the cluster."""
    return stack.service.authenticate(stack.service.create_account("ops", kind="admin")[1])


@pytest.fixture
def reader() -> Principal:
    """A caller reading the cluster's workflows (READ_CLUSTER) who administers nothing."""
    return Principal(
        "reader-account",
        "reader",
        permissions=frozenset({Permission.READ_CLUSTER, Permission.RUN_WORKFLOWS}),
    )


def workflow_count(stack: Stack, administrator: Principal) -> int:
    return len(stack.service.list_workflows_page(administrator)[0])


def test_a_node_service_account_may_not_start_workflows_over_rest(
    stack, node_service_token, administrator
):
    response = call(
        stack, "POST", "/workflows", node_service_token, json={"rawSpecification": HELLO}
    )
    message = refused(response)
    assert "may not start workflows (needs the run_workflows permission)" in message
    assert workflow_count(stack, administrator) == 0


def test_a_node_service_account_may_not_start_workflows_over_grpc(
    stack, node_service_token, channel, administrator
):
    with pytest.raises(grpc.RpcError) as refusal:
        pb_grpc.WorkflowServiceStub(channel).StartWorkflow(
            pb.StartWorkflowRequest(raw_specification=HELLO),
            metadata=[("authorization", f"Bearer {node_service_token}")],
        )
    assert refusal.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "run_workflows" in (refusal.value.details() or "")
    assert workflow_count(stack, administrator) == 0


def test_a_node_service_account_may_not_stop_workflows(stack, node_service_token):
    workflow_id = stack.start()
    message = refused(call(stack, "PATCH", f"/workflows/{workflow_id}:stop", node_service_token))
    assert "may not stop workflows (needs the run_workflows permission)" in message


def test_a_refused_start_is_audited(stack, administrator):
    monitoring = stack.service.create_account("alerts", kind="monitoring")[1]
    call(stack, "POST", "/workflows", monitoring, json={"rawSpecification": HELLO})
    entries = stack.service.service.audit.query(AuditQuery(action="permission_denied")).entries
    assert [(e.actor, e.detail["permission"]) for e in entries] == [("alerts", "run_workflows")]


def test_a_cluster_reader_reads_but_may_not_stop_another_accounts_workflow(
    stack, reader, administrator
):
    workflow_id = stack.start()
    assert stack.service.get_workflow(reader, workflow_id).id == workflow_id
    with pytest.raises(PermissionDenied, match="may not stop workflows of another account"):
        stack.service.stop_workflow(reader, workflow_id)
    assert stack.service.get_workflow(administrator, workflow_id).status != CANCELED


def test_a_cluster_administrator_stops_another_accounts_workflow(stack, administrator):
    workflow_id = stack.start()
    stack.service.stop_workflow(administrator, workflow_id)
    assert stack.service.get_workflow(administrator, workflow_id).status == CANCELED
