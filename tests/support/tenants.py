"""Two organizations with their people, made through Identity over a test stack's service.

``make_tenants(service)`` creates organization ``acme`` (an owner and a member) and ``globex``
(an owner), each person with an API token for their personal account, and a cluster ``admin``
service account; tests then call the REST routes as each of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fuzzball_core.service.identity_views import OrganizationView, UserView
from fuzzball_core.vocabulary import AccountKind

#: A password every rule of the policy accepts, for people whose password a test types.
PASSWORD = "Sturdy-Lantern-42x"


@dataclass(frozen=True)
class Person:
    """A user, their password, their personal account and an API token for it."""

    user: UserView
    password: str
    account_id: str
    token: str

    @property
    def id(self) -> str:
        return self.user.id

    @property
    def email(self) -> str:
        return self.user.email


@dataclass(frozen=True)
class Tenants:
    """Two organizations' people and the cluster administrator's token."""

    acme: OrganizationView
    globex: OrganizationView
    acme_owner: Person
    acme_member: Person
    globex_owner: Person
    admin_token: str


def person(identity: Any, user: UserView, password: str) -> Person:
    """``user`` with an API token for their personal account, as a sign-in would get it."""
    login = identity.login_principal(user.id)
    return Person(user, password, login.account_id, identity.account_token(login, login.account_id))


def make_tenants(service: Any) -> Tenants:
    """The two organizations over ``service`` (a SqlOrchestrateService)."""
    identity = service.identity
    acme, acme_owner, _ = identity.create_organization(
        "acme", owner_email="owner@acme.test", owner_password=PASSWORD
    )
    globex, globex_owner, _ = identity.create_organization(
        "globex", owner_email="owner@globex.test", owner_password=PASSWORD
    )
    owner = person(identity, acme_owner, PASSWORD)
    member, _ = identity.add_member(
        identity.login_principal(acme_owner.id), "dev@acme.test", password=PASSWORD
    )
    _, admin_token = identity.create_service_account("cluster-admin", AccountKind.ADMIN)
    return Tenants(
        acme=acme,
        globex=globex,
        acme_owner=owner,
        acme_member=person(identity, member, PASSWORD),
        globex_owner=person(identity, globex_owner, PASSWORD),
        admin_token=admin_token,
    )
