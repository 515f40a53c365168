"""Checks of request messages that both transports make, with the same words.

The REST gateway parses its bodies into the same ``fuzzball.v1`` request messages the gRPC
servicers receive; what is left to check after parsing (a required choice, an allowed value)
is checked here once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fuzzball_core.api.proto_messages import definition_dict
from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.errors import InvalidArgument
from fuzzball_core.scheduling import HoldEffect
from fuzzball_core.spec.names import check_hold_reason, check_workflow_name

#: Effects a hold can have: cordon, evict, deprovision.
HOLD_EFFECTS = tuple(effect.value for effect in HoldEffect)

#: StartWorkflowRequest fields of the swagger that the wire schema does not carry, each
#: accepted with a warning saying why it has no effect (``clusterId`` has one where the
#: service routes to clusters: Federate pins the member)
START_FIELDS_WITHOUT_EFFECT: dict[str, str] = {
    "workflowId": "has no effect here: the server chooses each workflow's id (the answer's id)",
    "clusterId": "has no effect here: this server is one cluster (a Federate routes by it)",
    "applicationId": "has no effect here: application usage is not tracked",
}
#: StartWorkflowRequest fields refused whenever they are given
START_FIELDS_REFUSED: dict[str, str] = {
    "secretsMap": (
        "not supported: secrets sent with a workflow are never used; store them"
        " (/v3/secrets) and name them in the workflow as secret://SCOPE/NAME"
    ),
}
#: what ``parse_request`` leaves to :func:`start_request_fields`
START_FIELDS_CHECKED_APART = frozenset(START_FIELDS_WITHOUT_EFFECT) | frozenset(
    START_FIELDS_REFUSED
)


@dataclass(frozen=True)
class StartFields:
    """What a start request's fields outside the wire schema amount to: the cluster it
    pins (where the service routes to clusters) and the warnings for the ones that have
    no effect."""

    cluster_id: str | None = None
    warnings: tuple[str, ...] = ()


def start_request_fields(sent: Mapping[str, Any], *, pins_clusters: bool) -> StartFields:
    """The swagger's start-request fields the wire schema has no place for, from the JSON
    body ``sent``: ``secretsMap`` refused (its values never repeated), ``workflowId``,
    ``applicationId`` and (unless the service ``pins_clusters``) ``clusterId`` accepted
    with a warning naming each. ``InvalidArgument`` naming a field of the wrong type."""
    for name, reason in START_FIELDS_REFUSED.items():
        if sent.get(name) is not None:
            raise InvalidArgument(f"{name}: {reason}")
    cluster_id, warnings = None, []
    for name, effect in START_FIELDS_WITHOUT_EFFECT.items():
        value = sent.get(name)
        if value is None:
            continue
        if not isinstance(value, str):
            raise InvalidArgument(f"{name}: expected a string")
        if not value:
            continue  # proto3's default: nothing asked for
        if name == "clusterId" and pins_clusters:
            cluster_id = value
            continue
        warnings.append(f"{name}: {effect}")
    return StartFields(cluster_id, tuple(warnings))


def workflow_source(
    request: pb.StartWorkflowRequest | pb.ValidateWorkflowRequest, *, missing: str
) -> dict[str, Any]:
    """The ``raw_specification``/``definition`` keyword arguments of a start or validate
    request; ``InvalidArgument(missing)`` when it has neither."""
    which = request.WhichOneof("source")
    if which == "raw_specification":
        return {"raw_specification": request.raw_specification, "definition": None}
    if which == "definition":
        return {"raw_specification": None, "definition": definition_dict(request.definition)}
    raise InvalidArgument(missing)


def workflow_name(request: pb.StartWorkflowRequest) -> str | None:
    """The name a start request gives its workflow (``None`` when it gives none), bounded
    and printable (``spec.names``); ``InvalidArgument`` naming ``name`` otherwise."""
    return check_workflow_name(request.name) if request.name else None


def hold_reason(request: pb.AddNodeHoldRequest) -> str:
    """The reason an add-hold request gives, bounded and printable (``spec.names``)."""
    return check_hold_reason(request.reason)


def hold_effect(effect: str) -> str:
    """``effect`` if it is one of :data:`HOLD_EFFECTS`; ``InvalidArgument`` naming the field."""
    if not effect:
        raise InvalidArgument(f"effect: required, one of {', '.join(HOLD_EFFECTS)}")
    if effect not in HOLD_EFFECTS:
        raise InvalidArgument(f"effect: expected one of {', '.join(HOLD_EFFECTS)}, got {effect!r}")
    return effect
