"""The JSON Schemas of a process's ``/healthz`` and ``/readyz`` replies, and their
declarations for the OpenAPI document.

:mod:`fuzzball_core.health` sits below the API layer and cannot declare its own routes, so
they are declared here, for every gateway that serves them (Orchestrate's, Federate's). Both
need no token (the gateway lists them as public) and take nothing; both answer the process's
report (:meth:`~fuzzball_core.health.Health.report`), ``/healthz`` with ``alive`` added.
"""

from __future__ import annotations

from typing import Any

from fuzzball_core.api.openapi import JsonOperation, documented
from fuzzball_core.health import HealthRoutes

_TAGS = ("health",)

CONDITION: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "ok": {"type": "boolean"},
        "message": {"type": "string"},
        "since": {"type": "number", "description": "when it last changed, in Unix seconds"},
        "failures": {"type": "integer", "minimum": 0},
        "required": {"type": "boolean", "description": "whether /readyz needs it"},
    },
    "required": ["name", "ok", "message", "since", "failures", "required"],
    "additionalProperties": False,
}
_REPORT_PROPERTIES: dict[str, Any] = {
    "process": {"type": "string"},
    "ready": {"type": "boolean"},
    "conditions": {"type": "array", "items": CONDITION},
}
READINESS: dict[str, Any] = {
    "type": "object",
    "properties": _REPORT_PROPERTIES,
    "required": ["process", "ready", "conditions"],
    "additionalProperties": False,
}
LIVENESS: dict[str, Any] = {
    "type": "object",
    "properties": {**_REPORT_PROPERTIES, "alive": {"type": "boolean", "enum": [True]}},
    "required": ["process", "ready", "conditions", "alive"],
    "additionalProperties": False,
}

HEALTHZ = JsonOperation(
    "alive: the process answers (its conditions listed, ready or not)", LIVENESS, tags=_TAGS
)
READYZ = JsonOperation(
    "ready: every required condition holds (probes checked afresh)",
    READINESS,
    also=((503, "not ready: a required condition does not hold (the report says which)"),),
    tags=_TAGS,
)

documented(HEALTHZ)(HealthRoutes.healthz)
documented(READYZ)(HealthRoutes.readyz)
