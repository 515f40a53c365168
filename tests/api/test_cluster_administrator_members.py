"""A cluster administrator is a member of an organization, and the cluster's: only a caller
who administers the cluster changes one. Before, any owner of their organization could reset
their password (and sign in as them), remove them, or change their role or email, as
``fuzzball local up`` makes the first organization's owner a cluster administrator.

Organization ``local`` here is as ``local up`` leaves it: ``root@local.test``, its first owner,
made a cluster administrator by the ``admin`` service account; ``owner@local.test`` a second
owner, who manages the members but not the cluster."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fuzzball_core.errors import PermissionDenied
from fuzzball_core.service.accounts import Accounts
from fuzzball_core.service.audit import AuditLog
from fuzzball_core.service.identity import Identity
from fuzzball_core.service.identity_views import UserView
from fuzzball_core.service.views import Principal
from fuzzball_core.store.database import connect, migrate, session_factory
from fuzzball_core.vocabulary import AccountKind, OrganizationRole

PASSWORD = "Sturdy-Lantern-42x"
#: what a refusal of an owner acting on the cluster administrator says
REFUSAL = r"root@local\.test is a cluster administrator \(needs the administer_cluster permission\)"


@pytest.fixture
def identity(tmp_path) -> Iterator[Identity]:
    engine = connect(f"sqlite:///{tmp_path / 'store.db'}")
    migrate(engine)
    sessions = session_factory(engine)
    yield Identity(sessions, Accounts(sessions), AuditLog(sessions))
    engine.dispose()


@pytest.fixture
def administrator(identity: Identity) -> Principal:
    """The ``admin`` service account (``fuzzball-orchestrate create-account --kind admin``)."""
    created, _ = identity.create_service_account("cluster-admin", AccountKind.ADMIN)
    return created


@pytest.fixture
def root(identity: Identity, administrator: Principal) -> UserView:
    """The organization's first owner, a cluster administrator (as ``local up`` makes it)."""
    _, owner, _ = identity.create_organization(
        "local", owner_email="root@local.test", owner_password=PASSWORD
    )
    return identity.update_member(administrator, owner.id, cluster_admin=True)


@pytest.fixture
def owner(identity: Identity, root: UserView) -> Principal:
    """A second owner of the organization, signed in; no cluster administrator."""
    added, _ = identity.add_member(
        identity.login_principal(root.id),
        "owner@local.test",
        role=OrganizationRole.OWNER,
        password=PASSWORD,
    )
    return identity.login_principal(added.id)


def test_an_owner_may_not_reset_a_cluster_administrators_password(identity, root, owner):
    with pytest.raises(PermissionDenied, match=rf"may not reset .*: {REFUSAL}"):
        identity.reset_password(owner, root.id, new_password="Taken-Over-Lantern-9")
    assert identity.check_password(root.email, PASSWORD).id == root.id


def test_an_owner_may_not_remove_a_cluster_administrator(identity, root, owner):
    with pytest.raises(PermissionDenied, match=REFUSAL):
        identity.remove_member(owner, root.id)
    assert identity.get_member(owner, root.id).email == root.email


def test_an_owner_may_not_demote_a_cluster_administrator(identity, root, owner):
    with pytest.raises(PermissionDenied, match=REFUSAL):
        identity.update_member(owner, root.id, role=OrganizationRole.MEMBER)
    assert identity.get_member(owner, root.id).role == OrganizationRole.OWNER


def test_an_owner_may_not_change_a_cluster_administrators_email(identity, root, owner):
    with pytest.raises(PermissionDenied, match=REFUSAL):
        identity.update_member(owner, root.id, email="mine@local.test")
    assert identity.get_member(owner, root.id).email == root.email


def test_an_owner_still_resets_a_members_password(identity, root, owner):
    member, _ = identity.add_member(owner, "dev@local.test", password=PASSWORD)
    generated = identity.reset_password(owner, member.id)
    assert generated and identity.check_password(member.email, generated).id == member.id


def test_a_cluster_administrator_resets_another_ones_password(identity, root, administrator):
    identity.reset_password(administrator, root.id, new_password="Another-Lantern-43y")
    assert identity.check_password(root.email, "Another-Lantern-43y").id == root.id


def test_a_cluster_administrator_owner_manages_their_organization_as_before(identity, root, owner):
    as_root = identity.login_principal(root.id)
    identity.update_member(as_root, owner.user_id, role=OrganizationRole.MEMBER)
    assert identity.get_member(as_root, owner.user_id).role == OrganizationRole.MEMBER
