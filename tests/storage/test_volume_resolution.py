"""Volume references resolved per their owner (fuzzball_core.orchestrate.volumes.resolve)."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session
from support.storage import plugin_driver

from fuzzball_core.errors import FailedPrecondition, InvalidArgument
from fuzzball_core.orchestrate import storage_catalog as catalog
from fuzzball_core.orchestrate import volumes
from fuzzball_core.orchestrate.volumes import VolumeOwner
from fuzzball_core.store.models import Node

ALICE = VolumeOwner("org-acme", "acct-alice", "user-alice", "alice@acme.test")
BOB = VolumeOwner("org-acme", "acct-bob", "user-bob", "bob@acme.test")
MALLORY = VolumeOwner("org-globex", "acct-mallory", "user-mallory", "m@globex.test")


def resolve(session: Session, owner: VolumeOwner, text: str, workflow_id: str = "wf-1"):
    return volumes.resolve(
        session, plugin_driver, owner, text, workflow_id=workflow_id, volume_key="data", now=100.0
    )


def test_a_persistent_reference_is_created_on_first_use_and_found_again(session: Session) -> None:
    first = resolve(session, ALICE, "volume://user/persistent/results", "wf-1")
    again = resolve(session, ALICE, "volume://user/persistent/results", "wf-2")
    assert first.volume_id is not None
    assert again.volume_id == first.volume_id
    assert again.location.volume_id == first.volume_id
    assert first.location.workflow_id is None


def test_another_users_same_reference_resolves_to_their_own_volume(session: Session) -> None:
    alice = resolve(session, ALICE, "volume://user/persistent/results")
    bob = resolve(session, BOB, "volume://user/persistent/results")
    mallory = resolve(session, MALLORY, "volume://user/persistent/results")
    assert len({alice.volume_id, bob.volume_id, mallory.volume_id}) == 3
    assert mallory.location.organization_id == "org-globex"


def test_a_group_reference_is_the_accounts_volume(session: Session) -> None:
    group = VolumeOwner("org-acme", "acct-team", "user-alice")
    other_member = VolumeOwner("org-acme", "acct-team", "user-bob")
    assert (
        resolve(session, group, "volume://group/persistent/shared").volume_id
        == resolve(session, other_member, "volume://group/persistent/shared").volume_id
    )


def test_a_nameless_persistent_reference_is_the_default_volume_with_a_warning(
    session: Session,
) -> None:
    resolved = resolve(session, ALICE, "volume://user/persistent")
    assert resolved.reference == "volume://user/persistent/default"
    assert "default persistent volume" in resolved.warnings[0]


def test_a_name_on_a_per_workflow_class_is_refused_naming_the_reference(
    session: Session,
) -> None:
    with pytest.raises(
        InvalidArgument, match=r"makes one volume per workflow.*volume://user/ephemeral$"
    ):
        resolve(session, ALICE, "volume://user/ephemeral/scratch", "wf-9")


def test_an_ephemeral_reference_is_a_per_workflow_volume(session: Session) -> None:
    resolved = resolve(session, ALICE, "volume://user/ephemeral", "wf-9")
    assert resolved.volume_id is None
    assert resolved.location.workflow_id == "wf-9"
    assert resolved.location.name == "data"
    assert not resolved.shared


def test_the_default_persistent_class_is_node_local(session: Session) -> None:
    resolved = resolve(session, ALICE, "volume://user/persistent/results")
    assert resolved.node_local and resolved.node_id is None
    assert resolved.volume_id is not None
    session.add(
        Node(
            id="node-7",
            name="n7",
            status="READY",
            cores=1,
            memory=1,
            registered_at=100.0,
            last_seen=100.0,
            lease_expires_at=200.0,
        )
    )
    volumes.record_node(session, resolved.volume_id, "node-7", 101.0)
    assert resolve(session, ALICE, "volume://user/persistent/results").node_id == "node-7"


def test_a_node_local_volume_whose_node_record_is_gone_is_lost_naming_it(
    session: Session,
) -> None:
    resolved = resolve(session, ALICE, "volume://user/persistent/results")
    assert resolved.volume_id is not None
    volumes.record_node(session, resolved.volume_id, "node-gone", 101.0)
    with pytest.raises(FailedPrecondition, match="lived on node node-gone, which is gone"):
        resolve(session, ALICE, "volume://user/persistent/results")
    (row,) = volumes.listed(session, ALICE)
    assert row.status == volumes.LOST


def test_an_unknown_class_is_refused_naming_it(session: Session) -> None:
    with pytest.raises(InvalidArgument, match="no storage class 'scratch'"):
        resolve(session, ALICE, "volume://user/scratch/x")


def test_a_restricted_class_refuses_first_use_naming_the_class(session: Session) -> None:
    catalog.ensure_defaults(session, 1.0)
    catalog.create_class(
        session,
        {
            "name": "curated",
            "driver": "local",
            "properties": {"persistent": True},
            "restricted": True,
        },
        plugin_driver,
        1.0,
    )
    with pytest.raises(FailedPrecondition, match="storage class 'curated' is restricted"):
        resolve(session, ALICE, "volume://user/curated/data")


def test_the_per_group_limit_refuses_one_more_volume(session: Session) -> None:
    catalog.ensure_defaults(session, 1.0)
    catalog.create_class(
        session,
        {
            "name": "small",
            "driver": "local",
            "properties": {"persistent": True},
            "volumes": {"maxByAccount": "1"},
        },
        plugin_driver,
        1.0,
    )
    resolve(session, ALICE, "volume://user/small/one")
    with pytest.raises(FailedPrecondition, match="allows 1 volume"):
        resolve(session, ALICE, "volume://user/small/two")


def test_a_shared_hostpath_class_makes_shared_per_workflow_volumes(session: Session) -> None:
    catalog.ensure_defaults(session, 1.0)
    catalog.create_class(
        session,
        {"name": "scratch", "driver": "hostpath", "parameters": {"root": "/srv/shared"}},
        plugin_driver,
        1.0,
    )
    resolved = resolve(session, ALICE, "volume://user/scratch")
    assert resolved.shared
    assert resolved.location.parameters["root"] == "/srv/shared"


@pytest.mark.parametrize(
    "text",
    [
        "volume://user",
        "volume://someone/persistent/x",
        "volume://user/persistent/../x",
        "file:///x",
    ],
)
def test_malformed_references_are_refused(session: Session, text: str) -> None:
    with pytest.raises(InvalidArgument):
        resolve(session, ALICE, text)
