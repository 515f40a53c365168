"""A Federate's callers of different organizations share no ``fuzzball://group/...`` image on
a member; callers of one organization there share them, as one organization's accounts do.

The accounts a member keeps for a Federate's callers belong to no organization here, and an
account of no organization had the group ``""``: every such account's. So a caller could read
another tenant's group image, run it, or overwrite it under the same name (and the other's
next workflow ran it). Now an account of no organization is a group of its own, and a
forwarded caller's group stands for its organization on the Federate.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from support.cluster import InProcessOrchestrate, free_port
from support.live_api import HELLO

from fuzzball_core.service.forwarded_identity import (
    HEADER,
    IdentitySigner,
    TrustedFederate,
    TrustedFederates,
)
from fuzzball_core.service.views import Principal
from fuzzball_core.store.models import Account
from fuzzball_core.store.object_cache import CacheAddress
from fuzzball_core.vocabulary import AccountKind

IMAGE = b"an EROFS image"


@dataclass
class Member:
    """An Orchestrate with an object cache that trusts the Federate ``signer`` signs for,
    and the token of the Federate's account on it."""

    orchestrate: InProcessOrchestrate
    rest_url: str
    federate_token: str
    signer: IdentitySigner

    def call(self, caller: Principal, method: str, path: str, body: Any = None) -> httpx.Response:
        """``METHOD /v3PATH`` as the Federate acting for ``caller``."""
        headers = {
            "Authorization": f"Bearer {self.federate_token}",
            HEADER: self.signer.assertion(caller, "member"),
        }
        return httpx.request(method, self.rest_url + path, headers=headers, json=body, timeout=30)

    def account_of(self, caller: Principal) -> str:
        """The id of the account the member keeps for ``caller`` (made by a first call)."""
        service = self.orchestrate.service
        assertion = self.signer.assertion(caller, "member")
        federate = self.orchestrate.call(lambda: service.authenticate(self.federate_token))
        return str(
            self.orchestrate.call(
                lambda: service.forwarded_principal(federate, assertion).account_id
            )
        )

    def store_group_image(self, caller: Principal, name: str) -> None:
        """``fuzzball://group/NAME`` stored as a build of ``caller``'s writes it."""
        cache = self.orchestrate.service.object_cache
        account = self.account_of(caller)
        address = CacheAddress.checked(account, "group", name, group=cache.group_of(account))
        self.orchestrate.call(lambda: cache.store(address, [IMAGE]))

    def uses(self, caller: Principal, uri: str) -> httpx.Response:
        spec = HELLO.replace("docker://alpine:latest", uri)
        return self.call(caller, "POST", "/workflows", {"name": "uses", "rawSpecification": spec})


@pytest.fixture(scope="module")
def member(tmp_path_factory) -> Iterator[Member]:
    directory = tmp_path_factory.mktemp("member")
    rest = f"127.0.0.1:{free_port()}"
    orchestrate = InProcessOrchestrate(
        {
            "data-dir": str(directory / "data"),
            "database": {"url": f"sqlite:///{directory / 'orchestrate.db'}"},
            "orchestrate": {"grpc-listen": f"127.0.0.1:{free_port()}", "rest-listen": rest},
            "tls": {"plaintext": True},
        }
    )
    try:
        key = Ed25519PrivateKey.generate()
        service = orchestrate.service
        service.trusted_federates = TrustedFederates(
            [TrustedFederate("federate", key.public_key())]
        )
        _, token = orchestrate.call(
            lambda: service.create_account("federate", kind=AccountKind.FEDERATE)
        )
        yield Member(orchestrate, f"http://{rest}/v3", token, IdentitySigner(key, "federate"))
    finally:
        orchestrate.close()


def _caller(subject: str, organization: str | None) -> Principal:
    """A Federate's user ``subject`` of the Federate's ``organization``."""
    return Principal(
        subject, subject, user_id=subject, email=f"{subject}@lab.test", organization_id=organization
    )


def test_a_forwarded_caller_reads_its_own_group_image(member):
    ann = _caller("ann", "org-a")
    member.store_group_image(ann, "own")
    reply = member.call(ann, "GET", "/objects/group/own")
    assert (reply.status_code, reply.content) == (200, IMAGE)


def test_a_forwarded_caller_of_the_same_organization_shares_its_group_images(member):
    member.store_group_image(_caller("ann", "org-a"), "shared")
    reply = member.call(_caller("amy", "org-a"), "GET", "/objects/group/shared")
    assert (reply.status_code, reply.content) == (200, IMAGE)


def test_a_forwarded_caller_of_another_organization_cannot_read_a_group_image(member):
    member.store_group_image(_caller("ann", "org-a"), "tools")
    reply = member.call(_caller("bob", "org-b"), "GET", "/objects/group/tools")
    assert reply.status_code == 404, reply.text


def test_a_forwarded_caller_of_no_organization_cannot_read_another_ones_group_image(member):
    member.store_group_image(_caller("solo", None), "alone")
    reply = member.call(_caller("lone", None), "GET", "/objects/group/alone")
    assert reply.status_code == 404, reply.text
    assert member.call(_caller("solo", None), "GET", "/objects/group/alone").status_code == 200


def test_a_workflow_of_another_organizations_forwarded_caller_cannot_use_a_group_image(member):
    member.store_group_image(_caller("ann", "org-a"), "runner")
    reply = member.uses(_caller("bob", "org-b"), "fuzzball://group/runner")
    assert reply.status_code == 404, reply.text
    assert "no image fuzzball://group/runner" in reply.json()["message"]


def test_a_workflow_of_the_forwarded_caller_uses_its_group_image(member):
    ann = _caller("ann", "org-a")
    member.store_group_image(ann, "runner-own")
    reply = member.uses(ann, "fuzzball://group/runner-own")
    assert reply.status_code == 200, reply.text


def test_a_service_account_of_no_organization_has_a_group_of_its_own(member):
    service = member.orchestrate.service
    cache = service.object_cache
    first, _ = member.orchestrate.call(
        lambda: service.create_account("watcher", kind=AccountKind.MONITORING)
    )
    second, _ = member.orchestrate.call(
        lambda: service.create_account("prober", kind=AccountKind.MONITORING)
    )
    groups = {cache.group_of(first.account_id), cache.group_of(second.account_id)}
    assert len(groups) == 2 and "" not in groups


def test_a_callers_account_made_before_groups_joins_its_organizations_group(member):
    """An account kept for a caller before migration 0024 has no group: the next call
    sets it, and the caller then shares its organization's images."""
    member.store_group_image(_caller("ann", "org-a"), "older")
    amy = _caller("amy", "org-a")
    account_id = member.account_of(amy)
    service = member.orchestrate.service
    with service.sessions() as session:
        session.get(Account, account_id).federate_group_id = None
        session.commit()
    service.forwarded_accounts._known.clear()  # a restarted member reads the account again
    reply = member.call(amy, "GET", "/objects/group/older")
    assert (reply.status_code, reply.content) == (200, IMAGE)
