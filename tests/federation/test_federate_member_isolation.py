"""Two callers of a Federate are kept apart on a member exactly as two local accounts are.

Before, a member acted for every forwarded caller in the Federate's own account there: two
Federate accounts' workflows ran as one member account, so ``volume://user/...`` and
``volume://group/...`` were the same volumes for both (one could read and overwrite the
other's data), and Federate's routing asked a member for "the caller's volumes" and got every
caller's. Now the member keeps an account for each forwarded caller and acts in it; the
Federate's own account still follows the workflows it submitted for them.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from support.federated_workflows import CPU

from fuzzball_core.orchestrate.volumes import VolumeOwner
from fuzzball_core.service.forwarded_identity import HEADER
from fuzzball_core.store.models import Workflow
from fuzzball_federation.models import FederatedWorkflow
from fuzzball_federation.needs import VolumeNeed


@pytest.fixture
def bob(federation) -> str:
    """A second Federate account's token (the fixture's user is ``alice``)."""
    return federation.service.create_account("bob")[1]


def _remote_id(federation, workflow_id: str) -> str:
    with federation.service.sessions() as session:
        row = session.get(FederatedWorkflow, workflow_id)
        assert row is not None
        return row.remote_id


def _on_aws(federation, token: str | None, method: str, path: str, **kwargs: Any):
    """A call to aws as Federate's account there, forwarding the identity of the Federate
    caller holding ``token`` (None: Federate acting for itself)."""
    aws = federation.members["aws"]
    headers = {"Authorization": f"Bearer {aws.token}"}
    if token is not None:
        who = federation.service.authenticate(token)
        headers[HEADER] = federation.service.signer.assertion(who, "aws")
    return httpx.request(method, f"{aws.rest_url}/v3{path}", headers=headers, timeout=10, **kwargs)


def _member_workflow(federation, remote_id: str) -> tuple[Workflow, VolumeOwner]:
    with federation.members["aws"].stack.service.sessions() as session:
        workflow = session.get(Workflow, remote_id)
        assert workflow is not None
        return workflow, VolumeOwner.of_workflow(session, workflow)


def test_two_federate_accounts_run_in_separate_accounts_on_a_member(federation, bob):
    alices = _remote_id(federation, federation.client().start_workflow(CPU))
    bobs = _remote_id(federation, federation.client(bob).start_workflow(CPU))
    alice_workflow, _ = _member_workflow(federation, alices)
    bob_workflow, _ = _member_workflow(federation, bobs)
    assert alice_workflow.account_id != bob_workflow.account_id


@pytest.mark.parametrize("scope", ["user", "group"])
def test_two_federate_accounts_volumes_resolve_to_different_owners_on_a_member(
    federation, bob, scope
):
    alices = _remote_id(federation, federation.client().start_workflow(CPU))
    bobs = _remote_id(federation, federation.client(bob).start_workflow(CPU))
    _, alice_owner = _member_workflow(federation, alices)
    _, bob_owner = _member_workflow(federation, bobs)
    assert alice_owner.owner_id(scope) != bob_owner.owner_id(scope)


def test_a_federate_callers_volume_on_a_member_is_not_another_callers(federation, bob):
    created = _on_aws(
        federation,
        federation.token,
        "POST",
        "/volumes",
        json={"volume": {"name": "results", "storageClassName": "persistent"}},
    )
    assert created.status_code == 200, created.text

    def listed(token: str) -> list[str]:
        reply = _on_aws(federation, token, "GET", "/volumes")
        assert reply.status_code == 200, reply.text
        return [volume["reference"] for volume in reply.json()["volumes"]]

    assert listed(federation.token) == ["volume://user/persistent/results"]
    assert listed(bob) == []
    reply = _on_aws(federation, bob, "GET", f"/volumes/{created.json()['id']}")
    assert reply.status_code == 404


def test_federates_routing_finds_only_the_callers_own_volumes(federation, bob):
    _on_aws(
        federation,
        federation.token,
        "POST",
        "/volumes",
        json={"volume": {"name": "results", "storageClassName": "persistent"}},
    ).raise_for_status()
    service = federation.service
    needs = [VolumeNeed("data", "volume://user/persistent/results")]
    offers = service.offers()
    alice_finds = service._volume_locations(service.authenticate(federation.token), needs, offers)
    bob_finds = service._volume_locations(service.authenticate(bob), needs, offers)
    assert list(alice_finds.get("volume://user/persistent/results", {})) == ["aws"]
    assert bob_finds == {}


def test_a_federate_caller_cannot_read_another_callers_workflow_on_a_member(federation, bob):
    alices = _remote_id(federation, federation.client().start_workflow(CPU))
    assert _on_aws(federation, federation.token, "GET", f"/workflows/{alices}").status_code == 200
    assert _on_aws(federation, bob, "GET", f"/workflows/{alices}").status_code == 404
    listed = _on_aws(federation, bob, "GET", "/workflows").json().get("workflows") or []
    assert alices not in [workflow["id"] for workflow in listed]


def test_the_federates_own_account_still_follows_its_callers_workflows(federation, bob):
    alices = _remote_id(federation, federation.client().start_workflow(CPU))
    bobs = _remote_id(federation, federation.client(bob).start_workflow(CPU))
    assert _on_aws(federation, None, "GET", f"/workflows/{alices}").status_code == 200
    listed = _on_aws(federation, None, "GET", "/workflows").json().get("workflows") or []
    assert {alices, bobs} <= {workflow["id"] for workflow in listed}


def test_a_workflow_the_federate_submitted_in_its_own_account_stays_readable_by_its_caller(
    federation,
):
    """One submitted before callers had accounts on the member: Federate's record says whose
    it is, and the member still answers for it."""
    before = _on_aws(
        federation, None, "POST", "/workflows", json={"rawSpecification": CPU, "name": "before"}
    )
    assert before.status_code == 200, before.text
    remote_id = before.json()["id"]
    reply = _on_aws(federation, federation.token, "GET", f"/workflows/{remote_id}")
    assert reply.status_code == 200
