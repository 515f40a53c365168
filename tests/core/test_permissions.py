"""Who may do what: a caller's permissions from its account kind, role and credential."""

import pytest

from fuzzball_core.errors import PermissionDenied
from fuzzball_core.service.permissions import lacks_to_control_workflow, permissions_for, require
from fuzzball_core.service.views import Principal
from fuzzball_core.vocabulary import CredentialKind, OrganizationRole, Permission


def test_an_organization_member_runs_workflows_but_holds_no_node():
    member = permissions_for("user", role=OrganizationRole.MEMBER)
    assert Permission.RUN_WORKFLOWS in member
    assert Permission.HOLD_NODES not in member
    assert Permission.MANAGE_ORGANIZATION not in member


def test_an_owner_manages_the_organization_but_not_the_cluster():
    owner = permissions_for("user", role=OrganizationRole.OWNER)
    assert Permission.MANAGE_ORGANIZATION in owner
    assert Permission.ADMINISTER_CLUSTER not in owner


def test_a_cluster_administrator_user_adds_the_cluster_permissions_to_the_role():
    admin = permissions_for("user", role=OrganizationRole.MEMBER, cluster_admin=True)
    assert {Permission.HOLD_NODES, Permission.READ_CLUSTER, Permission.RUN_WORKFLOWS} <= admin


def test_the_monitoring_account_may_hold_and_scrape_nodes_and_nothing_else():
    monitoring = permissions_for("monitoring")
    assert monitoring == {
        Permission.READ_NODES,
        Permission.HOLD_NODES,
        Permission.SCRAPE_NODE_METRICS,
    }


def test_a_workflow_token_is_bounded_whatever_its_owner_may_do():
    token = permissions_for("user", cluster_admin=True, credential=CredentialKind.WORKFLOW)
    assert token == {Permission.RUN_WORKFLOWS, Permission.READ_SECRETS}


def test_a_principal_naming_no_permissions_gets_its_kinds_own():
    assert Principal("a", "monitoring", kind="monitoring").may(Permission.HOLD_NODES)


def test_a_principal_given_an_empty_set_may_do_nothing():
    assert not Principal("a", "x", is_admin=True, permissions=frozenset()).may(
        Permission.RUN_WORKFLOWS
    )


def test_a_refusal_names_what_was_refused_and_the_missing_permission():
    member = Principal("a", "ann", email="ann@example.org")
    with pytest.raises(PermissionDenied, match=r"ann@example.org may not cordon .*hold_nodes"):
        require(member, Permission.HOLD_NODES, "cordon nodes")


def principal_with(*permissions: Permission) -> Principal:
    return Principal("a", "ann", permissions=frozenset(permissions))


def test_stopping_ones_own_workflow_needs_run_workflows_only():
    runner = principal_with(Permission.RUN_WORKFLOWS)
    assert lacks_to_control_workflow(runner, its_own=True) is None


def test_stopping_another_accounts_workflow_needs_administer_cluster_too():
    reader = principal_with(Permission.RUN_WORKFLOWS, Permission.READ_CLUSTER)
    assert lacks_to_control_workflow(reader, its_own=False) is Permission.ADMINISTER_CLUSTER
    admin = principal_with(Permission.RUN_WORKFLOWS, Permission.ADMINISTER_CLUSTER)
    assert lacks_to_control_workflow(admin, its_own=False) is None


def test_without_run_workflows_no_workflow_is_controlled_not_even_by_an_administrator():
    monitoring = principal_with(Permission.ADMINISTER_CLUSTER, Permission.HOLD_NODES)
    assert lacks_to_control_workflow(monitoring, its_own=True) is Permission.RUN_WORKFLOWS
    assert lacks_to_control_workflow(monitoring, its_own=False) is Permission.RUN_WORKFLOWS
