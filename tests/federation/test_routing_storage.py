"""Federate routes by the storage classes a workflow's volumes need, and moves on when a
member refuses.

Before, Federate read cores, memory, devices and annotations only: a workflow mounting a
volume of a class no member had passed Federate's validate and was then refused by the member
it was sent to, and that refusal ended the submission though another member could have run
it. Now each member's offer lists its storage classes (``GET /v3/storage-classes``); a member
lacking one (or having it disabled) is rejected with the reason, and a member's refusal at
submission passes the workflow to the next eligible member.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest
from google.protobuf import json_format
from support.federation_harness import Federation, start_federation
from support.storage import plugin_driver

from fuzzball_core.drivers import ClusterOffer, Router
from fuzzball_core.errors import InvalidArgument, NotFound
from fuzzball_core.orchestrate import storage_catalog as catalog
from fuzzball_core.store.models import StorageClass
from fuzzball_core.vocabulary import EventKind
from fuzzball_federation.capacity import storage_classes
from fuzzball_federation.models import FederatedWorkflow
from fuzzball_federation.needs import StorageNeed
from fuzzball_federation.offers import member_offer
from fuzzball_federation.routers.fit import storage_problem

FAST = """version: v1
volumes:
  data:
    reference: volume://user/fastscratch/results
jobs:
  main:
    image: {uri: docker://alpine:latest}
    command: [/bin/true]
    mounts: {data: {location: /data}}
    resource: {cpu: {cores: 1}, memory: {size: 1GiB}}
"""


def _add_fastscratch(federation: Federation, name: str) -> None:
    """Give member ``name`` a persistent storage class ``fastscratch``."""
    with federation.members[name].stack.service.sessions() as session:
        catalog.ensure_defaults(session, 1.0)
        catalog.create_class(
            session,
            {"name": "fastscratch", "driver": "local", "properties": {"persistent": True}},
            plugin_driver,
            1.0,
        )
        session.commit()


def _disable_fastscratch(federation: Federation, name: str) -> None:
    with federation.members[name].stack.service.sessions() as session:
        row = session.query(StorageClass).filter_by(name="fastscratch").one()
        row.status = catalog.DISABLED
        session.commit()


def _cluster_of(federation: Federation, workflow_id: str) -> str:
    with federation.service.sessions() as session:
        row = session.get(FederatedWorkflow, workflow_id)
        assert row is not None
        return row.cluster


def _routed(federation: Federation, workflow_id: str) -> dict[str, Any]:
    routed = federation.client().list_events(workflow_id)[0]
    assert routed.kind == EventKind.WORKFLOW_ROUTED
    return json_format.MessageToDict(routed.data)


class InOrder(Router):
    """Chooses every member, in the order given, whatever they offer."""

    def __init__(self, order: Sequence[str]) -> None:
        super().__init__({})
        self.order = list(order)

    def route(self, workflow: Mapping[str, Any], clusters: Sequence[ClusterOffer]) -> list[str]:
        return list(self.order)


@pytest.fixture
def aws_first(tmp_path, members) -> Iterator[Federation]:
    """Federate over ``onprem`` and ``aws`` whose router sends every workflow to aws first."""
    running = start_federation(tmp_path, members, router=InOrder(["aws", "onprem"]))
    try:
        yield running
    finally:
        running.close()


def test_validate_refuses_a_storage_class_no_member_has_naming_each_member(federation):
    with pytest.raises(InvalidArgument) as refused:
        federation.client().validate_workflow(FAST)
    message = refused.value.message
    for cluster in ("onprem", "aws"):
        assert f"cluster {cluster}: no storage class 'fastscratch' (volumes.data)" in message


def test_a_workflow_goes_to_the_member_with_its_storage_class(federation):
    _add_fastscratch(federation, "onprem")
    assert federation.client().validate_workflow(FAST) == []
    workflow_id = federation.client().start_workflow(FAST)
    assert _cluster_of(federation, workflow_id) == "onprem"
    assert _routed(federation, workflow_id)["rejected"] == {
        "aws": "no storage class 'fastscratch' (volumes.data)"
    }


def test_a_member_with_the_storage_class_disabled_is_rejected(federation):
    _add_fastscratch(federation, "onprem")
    _add_fastscratch(federation, "aws")
    _disable_fastscratch(federation, "aws")
    workflow_id = federation.client().start_workflow(FAST)
    assert _routed(federation, workflow_id)["rejected"] == {
        "aws": "storage class 'fastscratch' is disabled (volumes.data)"
    }


def test_a_members_refusal_passes_the_workflow_to_the_next_member(aws_first):
    _add_fastscratch(aws_first, "onprem")
    workflow_id = aws_first.client().start_workflow(FAST)
    assert _cluster_of(aws_first, workflow_id) == "onprem"
    rejected = _routed(aws_first, workflow_id)["rejected"]
    assert rejected == {"aws": "refused it: volumes.data: no storage class 'fastscratch'"}


def test_when_every_member_refuses_the_error_names_each_members_reason(aws_first):
    with pytest.raises(InvalidArgument) as refused:
        aws_first.client().start_workflow(FAST)
    message = refused.value.message
    for cluster in ("aws", "onprem"):
        assert (
            f"cluster {cluster}: refused it: volumes.data: no storage class 'fastscratch'"
            in message
        )
    assert message.index("cluster aws") < message.index("cluster onprem")


class _NoStorageRoutes:
    """A member's client whose cluster serves no ``/storage-classes`` (a Federate)."""

    def call_json(self, method: str, path: str, **_: Any) -> Any:
        raise NotFound(f"no API path /v3{path}")


def test_a_member_serving_no_storage_classes_is_not_rejected_for_storage():
    classes, notes = storage_classes(_NoStorageRoutes())
    offer = member_offer("federate-2", {}, [], storage_classes=classes)
    need = StorageNeed("data", "volume://user/fastscratch/results", "fastscratch")
    assert (classes, notes) == (None, [])
    assert storage_problem(offer, [need]) is None
