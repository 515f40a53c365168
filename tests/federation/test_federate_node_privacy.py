"""Federate's node views, like Orchestrate's, show another account's running work only as
"in use"; administrators see it under the federated id. Nodes are administrators' and the
node service accounts' to see: a user's node call is refused at the Federate.

Before, Federate passed on the member's view: the member-local workflow ids of every
account's work, seen by everyone. Its node events likewise: the allocations of workflows
another Federate account owned (under the member's ids) reached anyone reading nodes; now
they keep only the caller's own federated workflows' (an administrator's: every federated
workflow's), under the federated id.
"""

from __future__ import annotations

import httpx
import pytest
from support.federated_workflows import GPU

from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.errors import PermissionDenied
from fuzzball_core.service.views import IN_USE, STARTED
from fuzzball_federation.models import FederatedWorkflow


@pytest.fixture
def running(federation) -> tuple[str, str]:
    """Alice's workflow running on onprem's gpu-1: (federated id, the member's id)."""
    workflow_id = federation.client().start_workflow(GPU)
    with federation.service.sessions() as session:
        remote_id = session.get(FederatedWorkflow, workflow_id).remote_id
    federation.members["onprem"].stack.set_stage(remote_id, "jobs.main", STARTED)
    return workflow_id, remote_id


def test_an_administrator_sees_the_running_job_under_the_federated_id(federation, running):
    _, admin = federation.service.create_account("root", admin=True)
    node = federation.client(admin).get_node("gpu-1")
    assert list(node.running_jobs) == [pb.RunningJob(job_name="jobs.main", workflow_id=running[0])]


def test_an_account_reading_nodes_sees_anothers_job_only_as_in_use(federation, running):
    _, monitoring = federation.service.create_account("monitoring", kind="monitoring")
    node = federation.client(monitoring).get_node("gpu-1")
    assert list(node.running_jobs) == [pb.RunningJob(job_name=IN_USE)]
    assert not {running[0], running[1]} & {job.workflow_id for job in node.running_jobs}


def test_a_users_node_view_is_refused_at_the_federate(federation, running):
    with pytest.raises(PermissionDenied, match="read_nodes"):
        federation.client().get_node("gpu-1")


def _event_workflows(federation, token: str) -> set[str]:
    """The workflow ids of gpu-1's events, as the Federate account holding ``token`` reads."""
    events = federation.service.list_node_events(federation.service.authenticate(token), "gpu-1")
    return {event.workflow_id for event in events if event.workflow_id}


@pytest.fixture
def federates_own(federation) -> str:
    """A workflow the Federate submitted on onprem in its own account there (as before its
    callers had accounts), running on gpu-1: the member's id."""
    onprem = federation.members["onprem"]
    reply = httpx.post(
        f"{onprem.rest_url}/v3/workflows",
        headers={"Authorization": f"Bearer {onprem.token}"},
        json={"rawSpecification": GPU, "name": "before"},
        timeout=10,
    )
    assert reply.status_code == 200, reply.text
    remote_id = reply.json()["id"]
    onprem.stack.set_stage(remote_id, "jobs.main", STARTED)
    return remote_id


def test_an_account_reading_node_events_sees_no_other_workflows_allocations(
    federation, federates_own
):
    _, monitoring = federation.service.create_account("monitoring", kind="monitoring")
    assert _event_workflows(federation, monitoring) == set()


def test_an_administrator_reads_its_own_workflows_node_events_under_the_federated_id(
    federation, federates_own
):
    _, admin = federation.service.create_account("root", admin=True)
    workflow_id = federation.client(admin).start_workflow(GPU)
    with federation.service.sessions() as session:
        remote_id = session.get(FederatedWorkflow, workflow_id).remote_id
    federation.members["onprem"].stack.set_stage(remote_id, "jobs.main", STARTED)
    assert _event_workflows(federation, admin) == {workflow_id}
