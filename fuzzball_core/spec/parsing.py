"""Reading a workflow file: load, upgrade to v4, validate, collect warnings.

This is the one path every reader takes (submission, ``fuzzball workflow validate``,
``fuzzball workflow upgrade``), so a file is accepted or refused the same way everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import pydantic

from fuzzball_core.errors import Internal, InvalidArgument
from fuzzball_core.spec.defaults import MERGED_MODELS, effective_jobs, effective_services
from fuzzball_core.spec.fields import no_effect_warnings
from fuzzball_core.spec.loading import load_document
from fuzzball_core.spec.models import Job, Service, Workflow
from fuzzball_core.spec.plan import Plan, plan_workflow
from fuzzball_core.spec.references import check_references
from fuzzball_core.spec.upgrade import dump_yaml, normalize_document

#: A plugin validator: takes the v4 model, returns (field path, message) for each problem.
ExtraValidator = Callable[[Workflow], Iterable[tuple[str, str]]]


@dataclass(frozen=True)
class ParsedWorkflow:
    """A valid workflow: the v4 model as written (defaults not applied) and its warnings."""

    model: Workflow
    #: Human-readable warnings, each starting with the field path it concerns.
    warnings: list[str] = field(default_factory=list)
    #: The version the file declared: "v1" (upgraded) or "v4".
    source_version: str = "v4"

    @cached_property
    def jobs(self) -> dict[str, Job]:
        """Jobs with ``defaults.job`` applied."""
        return effective_jobs(self.model)

    @cached_property
    def services(self) -> dict[str, Service]:
        """Services with ``defaults.job`` env, mounts and resource applied."""
        return effective_services(self.model)

    #: its plans by ``pull_stages`` (:meth:`plan`), worked out once
    _plans: dict[bool, Plan] = field(default_factory=dict, init=False, repr=False, compare=False)

    def to_yaml(self) -> str:
        """The workflow as v4 YAML (what ``fuzzball workflow upgrade`` prints)."""
        return self._yaml

    @cached_property
    def _yaml(self) -> str:
        # once per parse: a parse reused for identical submissions (ParsedFiles) is stored
        # as the same v4 YAML each time, which cost ~0.15 ms of a submission's thread
        return dump_yaml(self.model.model_dump(by_alias=True, exclude_unset=True))

    def plan(self, *, pull_stages: bool) -> Plan:
        """:func:`plan_workflow` of this workflow, worked out once for each ``pull_stages``
        (the model is never changed after parsing, and a plan is only read)."""
        plan = self._plans.get(pull_stages)
        if plan is None:
            # two threads planning one reused parse at once each make an equal plan
            plan = self._plans[pull_stages] = plan_workflow(self, pull_stages=pull_stages)
        return plan


def parse_workflow(
    data: bytes | str,
    *,
    source: str = "<workflow>",
    extra_validators: Sequence[ExtraValidator] = (),
) -> ParsedWorkflow:
    """Read a v1 or v4 workflow file into a validated v4 model.

    ``data`` is the file as sent (never templated). ``source`` names it in messages.
    ``extra_validators`` (the plugin hook ``fuzzball_validate_workflow``) run on the model once
    it is otherwise valid. Raises ``InvalidArgument`` listing every problem found, each with
    its field path, in ``message`` and as ``{"field", "description"}`` entries in ``details``.
    """
    parsed = parse_unchecked(data, source=source)
    check_extra(parsed, extra_validators, source=source)
    return parsed


def parse_unchecked(data: bytes | str, *, source: str = "<workflow>") -> ParsedWorkflow:
    """:func:`parse_workflow` without the plugin validators: the file's own checks, which
    depend on its text alone (so their result may be reused for the same text, with
    :func:`check_extra` run each time)."""
    try:
        document = load_document(data)
    except InvalidArgument as exc:
        # named like the file's other errors (the details, by field, are the same)
        raise InvalidArgument(f"{source}: {exc.message}", details=exc.details) from None
    normalized = normalize_document(document)
    errors: list[tuple[str, str]] = list(normalized.errors)
    warnings = list(normalized.warnings)
    if normalized.source_version is None:
        raise _invalid(source, errors)
    model: Workflow | None = None
    try:
        model = Workflow.model_validate(normalized.document)
    except pydantic.ValidationError as exc:
        errors.extend(
            (normalized.written_path(path), message) for path, message in _schema_errors(exc)
        )
    reference_errors, reference_warnings = check_references(normalized.document)
    errors.extend((normalized.written_path(p), m) for p, m in reference_errors)
    warnings.extend(reference_warnings)
    if model is not None and not errors:
        errors.extend((normalized.written_path(p), m) for p, m in _merged_step_errors(model))
    if errors:
        raise _invalid(source, errors)
    assert model is not None
    warnings.extend(
        f"{normalized.written_path(path)}: {reason}" for path, reason in no_effect_warnings(model)
    )
    return ParsedWorkflow(model, warnings, normalized.source_version)


def _merged_step_errors(model: Workflow) -> list[tuple[str, str]]:
    """(path, message) for each job or service that is valid as written but not once its
    defaults are merged in: a rule spanning two fields (``memory.by-core`` x ``cpu.cores``),
    one of them from ``defaults``, is checked here on each merged part (``MERGED_MODELS``)."""
    found: list[tuple[str, str]] = []
    kinds = (
        ("jobs", model.jobs or {}, effective_jobs(model)),
        ("services", model.services or {}, effective_services(model)),
    )
    for kind, written, merged in kinds:
        for name, step in merged.items():
            for field_name in MERGED_MODELS:
                value = getattr(step, field_name, None)
                if value is getattr(written[name], field_name, None) or value is None:
                    continue  # validated as written
                try:
                    type(value).model_validate(value.model_dump(by_alias=True, exclude_unset=True))
                except pydantic.ValidationError as exc:
                    found.extend(
                        (path, f"with the workflow's defaults applied, {message}")
                        for path, message in _schema_errors(exc, prefix=(kind, name, field_name))
                    )
    return found


def check_extra(
    parsed: ParsedWorkflow, extra_validators: Sequence[ExtraValidator], *, source: str
) -> None:
    """Run the plugin validators on a parsed workflow; raise ``InvalidArgument`` listing
    their problems, as :func:`parse_workflow` does."""
    errors: list[tuple[str, str]] = []
    for validator in extra_validators:
        errors.extend(_run_validator(validator, parsed.model))
    if errors:
        raise _invalid(source, errors)


def validate_workflow(
    data: bytes | str,
    *,
    source: str = "<workflow>",
    extra_validators: Sequence[ExtraValidator] = (),
) -> list[str]:
    """Validate a workflow file; return its warnings or raise ``InvalidArgument``.

    The same checks as ``parse_workflow`` (a v1 file is upgraded first, as on submission).
    """
    return parse_workflow(data, source=source, extra_validators=extra_validators).warnings


def upgrade_to_v4(data: bytes | str, *, source: str = "<workflow>") -> str:
    """Return a valid v1 or v4 workflow file as v4 YAML; raise ``InvalidArgument`` if invalid."""
    return parse_workflow(data, source=source).to_yaml()


def _run_validator(validator: ExtraValidator, model: Workflow) -> list[tuple[str, str]]:
    try:
        return [(str(path), str(message)) for path, message in validator(model)]
    except Exception as exc:
        # A broken plugin is our problem, not the user's; its text may quote the workflow.
        name = getattr(validator, "__qualname__", type(validator).__name__)
        raise Internal(f"workflow validator {name} failed ({type(exc).__name__})") from exc


def field_violations(error: InvalidArgument) -> list[tuple[str, str]]:
    """The (field path, description) pairs an ``InvalidArgument`` from this package carries."""
    return [
        (str(d.get("field", "")), str(d.get("description", "")))
        for d in error.details
        if isinstance(d, dict)
    ]


def _invalid(source: str, errors: list[tuple[str, str]]) -> InvalidArgument:
    unique = list(dict.fromkeys(errors))
    count = f"{len(unique)} error" + ("s" if len(unique) != 1 else "")
    lines = [f"{source}: invalid workflow ({count})"]
    lines += [f"  {path or '(file)'}: {message}" for path, message in unique]
    details = [{"field": path, "description": message} for path, message in unique]
    return InvalidArgument("\n".join(lines), details=details)


_MESSAGE_REWRITES = {
    "missing": "is required",
    "extra_forbidden": "unknown field",
    "dict_type": "must be a mapping",
    "list_type": "must be a list",
    "string_type": "must be text",
    "model_type": "must be a mapping",
    "model_attributes_type": "must be a mapping",
    # 1.5 or "1.5" where a count is wanted: pydantic's words ("unable to parse string as an
    # integer") speak of its own parse, not of what the field needs
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
}


def _schema_errors(
    exc: pydantic.ValidationError, *, prefix: tuple[str, ...] = ()
) -> list[tuple[str, str]]:
    """(path, message) per pydantic error, each path under ``prefix`` (the model's own place
    in the file); messages never include the input value."""
    found = []
    for error in exc.errors(include_url=False, include_input=False, include_context=False):
        found.append((_loc_to_path((*prefix, *error["loc"])), _message(error)))
    return found


def _message(error: Any) -> str:
    kind = error["type"]
    if kind in _MESSAGE_REWRITES:
        return _MESSAGE_REWRITES[kind]
    message = str(error["msg"])
    for prefix in ("Value error, ", "Assertion failed, "):
        message = message.removeprefix(prefix)
    if message.startswith("Input should be"):
        message = "must be" + message[len("Input should be") :]
    return message


def _loc_to_path(loc: tuple[Any, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part == "[key]":
            path += " (key)"
        else:
            path += f".{part}" if path else str(part)
    return path
