"""A federated workflow is read and controlled through Federate; the member answers."""

from __future__ import annotations

import threading

import httpx
import pytest
from support.federated_workflows import CPU, GPU

from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.client import FuzzballClient
from fuzzball_core.errors import NotFound, Unauthenticated
from fuzzball_core.service.views import CANCELED, FINISHED
from fuzzball_federation.models import FederatedWorkflow
from fuzzball_federation.service import CLUSTER_ANNOTATION


def _remote_id(federation, workflow_id):
    with federation.service.sessions() as session:
        return session.get(FederatedWorkflow, workflow_id).remote_id


def test_status_of_a_federated_workflow_is_its_members(federation):
    client = federation.client()
    workflow_id = client.start_workflow(CPU, name="cpu")
    aws = federation.members["aws"].stack
    aws.set_stage(_remote_id(federation, workflow_id), "jobs.main", FINISHED)
    status = client.workflow_status(workflow_id)
    assert status.id == workflow_id
    assert status.workflow_status == pb.STAGE_STATUS_FINISHED
    assert [s.name for s in status.status.stages][-1] == "jobs.main"


def test_logs_of_a_federated_workflow_come_from_its_member(federation):
    client = federation.client()
    workflow_id = client.start_workflow(GPU)
    remote_id = _remote_id(federation, workflow_id)
    onprem = federation.members["onprem"].stack
    onprem.emit_log(remote_id, "jobs.main", "hello from onprem\n")
    onprem.set_stage(remote_id, "jobs.main", FINISHED)
    chunks = list(client.stream_logs(workflow_id, "main"))
    assert b"".join(c.output for c in chunks) == b"hello from onprem\n"
    followed = list(client.stream_logs(workflow_id, follow=True))
    assert [c.stage_name for c in followed] == ["jobs.main"]


def test_stop_of_a_federated_workflow_cancels_it_on_its_member(federation):
    client = federation.client()
    workflow_id = client.start_workflow(CPU)
    client.stop_workflow(workflow_id)
    aws = federation.members["aws"]
    remote = aws.stack.get_workflow(
        aws.stack.authenticate(aws.token), _remote_id(federation, workflow_id)
    )
    assert remote.status == CANCELED
    assert client.get_workflow(workflow_id).status == pb.STAGE_STATUS_CANCELED


def test_events_of_a_federated_workflow_carry_the_federated_id(federation):
    client = federation.client()
    workflow_id = client.start_workflow(CPU)
    events = client.list_events(workflow_id)
    assert events
    assert {e.workflow_id for e in events} == {workflow_id}


def test_listing_merges_members_and_leaves_out_work_submitted_to_them_directly(federation):
    client = federation.client()
    on_gpu = client.start_workflow(GPU, name="gpu")
    on_cpu = client.start_workflow(CPU, name="cpu")
    aws = federation.members["aws"]
    aws.stack.start_workflow(
        aws.stack.authenticate(aws.token), raw_specification=CPU, name="direct"
    )
    listed = client.list_workflows()
    assert [w.id for w in listed] == [on_cpu, on_gpu]
    assert [w.name for w in listed] == ["cpu", "gpu"]


def test_one_accounts_workflows_are_hidden_from_another(federation):
    workflow_id = federation.client().start_workflow(CPU)
    _, bob = federation.service.create_account("bob")
    with pytest.raises(NotFound):
        federation.client(bob).get_workflow(workflow_id)
    assert federation.client(bob).list_workflows() == []


@pytest.mark.parametrize("path", ["/v3/workflows", "/v3/nodes", "/v3/clusters"])
def test_requests_without_a_valid_token_are_refused_with_401(federation, path):
    assert httpx.get(federation.rest_url + path).status_code == 401
    bad = {"Authorization": "Bearer nope"}
    assert httpx.get(federation.rest_url + path, headers=bad).status_code == 401
    with pytest.raises(Unauthenticated):
        federation.client("nope").list_workflows()


def admin_client(federation) -> FuzzballClient:
    """A client of a Federate administrator: nodes are administrators' to see."""
    return federation.client(federation.service.create_account("root", admin=True)[1])


def test_nodes_of_every_member_are_listed_with_their_cluster(federation):
    nodes = admin_client(federation).list_nodes()
    clusters = {n.host_name: n.resource.annotations[CLUSTER_ANNOTATION] for n in nodes}
    assert clusters == {"gpu-1": "onprem", "cpu-1": "aws", "cpu-2": "aws"}


def test_a_node_is_found_by_name_on_its_member(federation):
    node = admin_client(federation).get_node("gpu-1")
    assert dict(node.resource.total.devices) == {"nvidia.com/gpu": 2}
    assert node.resource.annotations[CLUSTER_ANNOTATION] == "onprem"


def test_a_stalled_member_holds_up_only_the_calls_that_need_it(federation, monkeypatch):
    client = federation.client()
    workflow_id = client.start_workflow(GPU)  # runs on onprem
    asking = threading.Event()
    ask_each = federation.service._ask_each

    def noted_ask_each(*args, **kwargs):
        asking.set()
        return ask_each(*args, **kwargs)

    monkeypatch.setattr(federation.service, "_ask_each", noted_ask_each)
    stalled, release = threading.Event(), threading.Event()

    def stall() -> None:  # aws's event loop stops answering until released
        stalled.set()
        release.wait(60)

    federation.members["aws"].loop.loop.call_soon_threadsafe(stall)
    assert stalled.wait(10)
    listing: list[list[pb.ListNodeInfo]] = []
    admin = admin_client(federation)
    lister = threading.Thread(target=lambda: listing.append(admin.list_nodes()))
    lister.start()
    try:
        assert asking.wait(10)  # the node listing is waiting on the members now
        quick = FuzzballClient(f"{federation.rest_url}/v3", federation.token, timeout=5)
        # ...and Federate still answers about the onprem workflow meanwhile
        assert quick.get_workflow(workflow_id).id == workflow_id
        assert lister.is_alive()
    finally:
        release.set()
    lister.join(30)
    clusters = {n.resource.annotations[CLUSTER_ANNOTATION] for n in listing[0]}
    assert clusters == {"aws", "onprem"}
