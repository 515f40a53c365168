"""Workflow specification: Fuzzfile v1 and v4, validated, upgraded and planned.

Public API (stable; other packages build on it)::

    parse_workflow(data, *, source="<workflow>", extra_validators=()) -> ParsedWorkflow
        Read a v1 or v4 file (bytes or text, sent unchanged: never templated). v1 is upgraded
        to v4 first, exactly as on submission. Returns the v4 model (``.model``, defaults
        not applied), ``.warnings`` (strings starting with a field path), ``.jobs`` and
        ``.services`` with ``defaults.job`` applied, and ``.to_yaml()``. Raises
        ``fuzzball_core.errors.InvalidArgument`` listing every error; its ``details`` hold
        ``{"field": PATH, "description": TEXT}`` entries (see ``field_violations``).
    validate_workflow(data, *, source=..., extra_validators=()) -> list[str]
        The same checks; returns the warnings.
    upgrade_to_v4(data, *, source=...) -> str
        The file as v4 YAML (``fuzzball workflow upgrade``).
    plan_workflow(model_or_parsed) -> Plan
        The stage graph: ``Plan.stages`` (``Stage`` with ``kind`` image/volume/job/service
        and ids ``images.NAME``, ``volumes.NAME``, ``jobs.NAME``, ``services.NAME``),
        ``Plan.edges`` (``Edge(source, target, condition)``, conditions on-success,
        on-failure, on-running), ``topological_order()`` and
        ``advance(finished, failed, canceled, *, started, running, changed) -> (ready,
        skipped)``. Task arrays stay one stage with a lazy ``TaskRange``.
    parse_memory_size(text) -> int bytes;  parse_duration(text) -> float seconds

``extra_validators`` are callables taking the ``Workflow`` model and returning
``(field path, message)`` pairs; the plugin hook ``fuzzball_validate_workflow`` feeds them.

Input limits (any byte string ends in a result or an InvalidArgument, in bounded time and
memory): ``loading.MAX_DOCUMENT_BYTES`` (16 MiB), ``loading.MAX_DEPTH`` (64 levels),
``loading.MAX_NODES`` (1,000,000 nodes with aliases expanded). Every count, id and number of
seconds in a file is within int32 (``models.INT32_MAX``; the wire schema carries them so),
the field named when it is not. ``names`` holds the rules for the free text sent beside a
file (workflow names, hold reasons: bounded, printable) and ``printable`` for showing a
server's text on a terminal.
"""

from fuzzball_core.spec.models import Job, Service, Workflow
from fuzzball_core.spec.parsing import (
    ExtraValidator,
    ParsedWorkflow,
    field_violations,
    parse_workflow,
    upgrade_to_v4,
    validate_workflow,
)
from fuzzball_core.spec.plan import (
    Advance,
    Condition,
    Edge,
    ImagePull,
    Plan,
    Stage,
    StageKind,
    TaskRange,
    plan_workflow,
)
from fuzzball_core.spec.units import parse_duration, parse_memory_size

__all__ = [
    "Advance",
    "Condition",
    "Edge",
    "ExtraValidator",
    "ImagePull",
    "Job",
    "ParsedWorkflow",
    "Plan",
    "Service",
    "Stage",
    "StageKind",
    "TaskRange",
    "Workflow",
    "field_violations",
    "parse_duration",
    "parse_memory_size",
    "parse_workflow",
    "plan_workflow",
    "upgrade_to_v4",
    "validate_workflow",
]
