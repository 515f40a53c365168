"""The JSON Schemas of the monitoring routes that answer JSON, for the OpenAPI document.

``GET /v4/nodes/-/sd_config`` answers Prometheus' ``http_sd`` format (a list of target
groups, each its ``targets`` and string ``labels``); ``POST /v3/monitoring/client-certificates``
takes ``{"name"}`` (1 to 64 characters, not blank; other fields are ignored) and answers the
certificate, its key and the CA certificate in PEM. These routes are not in Fuzzball's
swagger.
"""

from __future__ import annotations

from typing import Any

from fuzzball_core.api.openapi import JsonOperation, Query

_STRING: dict[str, Any] = {"type": "string"}
_TAGS = ("monitoring",)

TARGET_GROUP: dict[str, Any] = {
    "type": "object",
    "properties": {
        "targets": {"type": "array", "items": _STRING, "minItems": 1, "maxItems": 1},
        "labels": {"type": "object", "additionalProperties": _STRING},
    },
    "required": ["targets", "labels"],
    "additionalProperties": False,
}
SD_GROUPS: dict[str, Any] = {"type": "array", "items": TARGET_GROUP}
CERTIFICATE_REQUEST: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 64, "pattern": r"\S"}},
    "required": ["name"],
}
ISSUED_CERTIFICATE: dict[str, Any] = {
    "type": "object",
    "properties": {"name": _STRING, "certificate": _STRING, "key": _STRING, "ca": _STRING},
    "required": ["name", "certificate", "key", "ca"],
    "additionalProperties": False,
}

SD_CONFIG = JsonOperation(
    "Prometheus http_sd target groups: each node's metrics endpoints (read_nodes)",
    SD_GROUPS,
    query=(
        Query(
            "mode",
            "string",
            "direct (the nodes' own addresses) or proxy (through /v4/metrics/node here);"
            " none: monitoring.node-metrics-mode",
        ),
    ),
    tags=_TAGS,
)
CLIENT_CERTIFICATE = JsonOperation(
    "a client certificate from the monitoring CA, for an external Alertmanager, with its key"
    " and the CA certificate in PEM (administer_cluster)",
    ISSUED_CERTIFICATE,
    CERTIFICATE_REQUEST,
    tags=_TAGS,
)
