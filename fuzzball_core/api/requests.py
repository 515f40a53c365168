"""Checks of request messages that both transports make, with the same words.

The REST gateway parses its bodies into the same ``fuzzball.v1`` request messages the gRPC
servicers receive; what is left to check after parsing (a required choice, an allowed value)
is checked here once.
"""

from __future__ import annotations

from typing import Any

from fuzzball_core.api.proto_messages import definition_dict
from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.errors import InvalidArgument
from fuzzball_core.scheduling import HoldEffect
from fuzzball_core.spec.names import check_hold_reason, check_workflow_name

#: Effects a hold can have: cordon, evict, deprovision.
HOLD_EFFECTS = tuple(effect.value for effect in HoldEffect)


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
