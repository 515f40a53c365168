"""Federate checks run_workflows itself before asking any member: its monitoring and
provisioner accounts may neither start nor stop workflows. READ_CLUSTER, which shows every
account's workflows, is read only: stopping another's needs administer_cluster as well."""

from __future__ import annotations

import pytest
from support.federated_workflows import CPU

from fuzzball_core.errors import PermissionDenied
from fuzzball_core.service.views import Principal
from fuzzball_core.vocabulary import Permission
from fuzzball_federation.models import FederatedWorkflow


def workflow_count(federation) -> int:
    with federation.service.sessions() as session:
        return len(session.query(FederatedWorkflow).all())


def asked_a_member(*args, **kwargs):
    raise AssertionError("a member was asked")


@pytest.mark.parametrize("kind", ["monitoring", "provisioner"])
def test_a_node_service_account_may_not_start_workflows(federation, kind, monkeypatch):
    _, token = federation.service.create_account(kind, kind=kind)
    monkeypatch.setattr(federation.service, "submit", asked_a_member)  # refused before
    with pytest.raises(PermissionDenied, match=r"may not start workflows .*run_workflows"):
        federation.client(token).start_workflow(CPU)
    assert workflow_count(federation) == 0


def test_a_node_service_account_may_not_stop_workflows(federation):
    workflow_id = federation.client().start_workflow(CPU)
    _, token = federation.service.create_account("alerts", kind="monitoring")
    with pytest.raises(PermissionDenied, match=r"may not stop workflows .*run_workflows"):
        federation.client(token).stop_workflow(workflow_id)


def test_a_cluster_reader_may_not_stop_another_accounts_workflow(federation):
    workflow_id = federation.client().start_workflow(CPU)
    reader = Principal(
        "reader-account",
        "reader",
        permissions=frozenset({Permission.READ_CLUSTER, Permission.RUN_WORKFLOWS}),
    )
    with pytest.raises(PermissionDenied, match="may not stop workflows of another account"):
        federation.service.stop_workflow(reader, workflow_id)
    with federation.service.sessions() as session:
        assert session.get(FederatedWorkflow, workflow_id).stop_requested_at is None
