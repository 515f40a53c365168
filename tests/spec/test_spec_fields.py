"""Every field real Fuzzball takes is used here, accepted with a warning, or refused.

The table below classifies every field of Fuzzball's ``WorkflowDefinition``, walked from the
swagger file itself (so a field a new swagger adds fails these tests until it is classified),
and every field the v4 model reads (Fuzzball v4's additions and the short forms), as one of:

* ``Used``: the consumer that reads it (it must exist and read that field), and no warning or
  refusal about it;
* ``Warned``: accepted with a warning saying it has no effect here (the text asserted);
* ``Refused``: refused at submission with the reason (the text asserted), never as an
  "unknown field".

Two workflow files set every field of the table (``fixtures/every_field_v4.yaml`` and, for the
v1-only fields, ``fixtures/every_field_v1.yaml``); each row is checked on them.
"""

from __future__ import annotations

import importlib
import inspect
import json
import re
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from support.example_files import REPO_ROOT

from fuzzball_core.orchestrate.capabilities import refused_fields
from fuzzball_core.spec import ParsedWorkflow, Workflow, parse_workflow, plan_workflow
from fuzzball_core.spec.fields import NO_EFFECT
from fuzzball_core.spec.loading import load_document
from fuzzball_core.spec.upgrade import API_SPELLINGS

SWAGGER = REPO_ROOT / ".." / "shared" / "reference" / "fuzzball-api-v3.3.swagger.json"
FIXTURES = Path(__file__).parent / "fixtures"
DOCS = REPO_ROOT / "docs" / "fields.md"
EVERY_FIELD_FILES = ("every_field_v4.yaml", "every_field_v1.yaml")


@pytest.fixture
def definitions() -> dict[str, Any]:
    """The swagger's definitions; the tests that walk them skip, naming the folder, without it
    (it is in ``shared/`` beside the clone, as CI lays it out)."""
    if not SWAGGER.exists():
        pytest.skip(f"Fuzzball's swagger is not in {SWAGGER.resolve().parent}")
    return dict(json.loads(SWAGGER.read_text())["definitions"])


@dataclass(frozen=True)
class Used:
    """Read by ``consumer`` (``module`` or ``module:qualified.name``), which names ``reads``;
    ``reads=None``: kept as written in the stored v4 definition (``ParsedWorkflow.to_yaml``)."""

    consumer: str
    reads: str | None


@dataclass(frozen=True)
class Warned:
    """Accepted, with the warning ``text`` on the field ``at`` (the row's own by default)."""

    text: str
    at: str | None = None


@dataclass(frozen=True)
class Refused:
    """Refused at submission with ``text``, naming the field ``at`` (the row's own by default)."""

    text: str
    at: str | None = None


Row = Used | Warned | Refused

# --- consumers ------------------------------------------------------------------------------

UPGRADE = "fuzzball_core.spec.upgrade"
VOLUME_KIND = "fuzzball_core.spec.models:Volume.storage_reference"
PLAN = "fuzzball_core.spec.plan:plan_workflow"
DEFAULTS = "fuzzball_core.spec.defaults:combine_defaults"
RESOURCES = "fuzzball_core.spec.resources"
REQUESTS = "fuzzball_core.orchestrate.requests"
CAPABILITIES = "fuzzball_core.orchestrate.capabilities"
RETRIES = "fuzzball_core.orchestrate.retries"
IMAGE_STAGES = "fuzzball_core.orchestrate.image_stages"
STEPS = "fuzzball_core.substrate.drivers.steps"
CONTAINER_JOB = "fuzzball_core.substrate.drivers.container_job"
PROBES = "fuzzball_core.substrate.probes"
RANKS = "fuzzball_core.substrate.ranks"
NETWORK = "fuzzball_core.substrate.network"
KEPT = Used("fuzzball_core.spec.parsing:ParsedWorkflow.to_yaml", None)

# --- the texts ------------------------------------------------------------------------------

PREEMPT = "has no effect here; this cluster never preempts work"
NAME_IGNORED = "ignored; the key names it"
SECRETS_REFUSED = "secrets are not supported here yet"
IMAGE_SECRETS = "is not read here; give the registry credentials in secret"
ENCRYPTED = "encrypted images are not supported here yet"
DESTINATION = "has no effect here; the destination is a file inside the volume"
INGRESS_CACHE = "has no effect here; an ingress file is fetched from its source every time"
IMAGE_CACHE = (
    "has no effect on images here; cache-ttl sets how long a pin of the image may be reused"
)
EGRESS_STAGE = "fuzzball_core.orchestrate.egress_stage:payload"
EGRESS_SOURCE = "has no meaning here: the source is a file of the volume"
LIVENESS = "liveness probes are not checked here yet"
PROBE_ACTION = "only tcp-socket and http-get readiness probes are checked here yet"


def _image_rows(prefix: str) -> dict[str, Row]:
    return {
        f"{prefix}.uri": Used(PLAN, "uri"),
        f"{prefix}.secret": Used(PLAN, "secret"),
        f"{prefix}.secrets.*": Refused(IMAGE_SECRETS, at=f"{prefix}.secrets"),
        f"{prefix}.decryption-secret": Refused(ENCRYPTED),
        f"{prefix}.cache": Warned(IMAGE_CACHE),
        f"{prefix}.cache-ttl": Used(PLAN, "cache_ttl"),
    }


def _resource_rows(prefix: str, defaults: bool = False) -> dict[str, Row]:
    def used(consumer: str, reads: str) -> Used:
        return Used(DEFAULTS, "resource") if defaults else Used(consumer, reads)

    pinning = f"{RESOURCES}:cpu_pinning"
    return {
        f"{prefix}.cpu.cores": used(f"{RESOURCES}:job_resources", "cores"),
        f"{prefix}.cpu.affinity": used(pinning, "affinity"),
        f"{prefix}.cpu.sockets": used(pinning, "sockets"),
        f"{prefix}.cpu.threads": used(pinning, "threads"),
        f"{prefix}.memory.size": used(f"{RESOURCES}:job_resources", "size_bytes"),
        f"{prefix}.memory.by-core": used(f"{RESOURCES}:job_resources", "by_core"),
        f"{prefix}.devices.*": used(f"{RESOURCES}:job_resources", "devices"),
        f"{prefix}.exclusive": used(f"{REQUESTS}:job_request", "exclusive"),
        f"{prefix}.annotations.*": used(f"{REQUESTS}:job_request", "annotations"),
    }


def _policy_rows(prefix: str) -> dict[str, Row]:
    return {
        f"{prefix}.timeout.execute": Used(f"{RESOURCES}:timeout_seconds", "execute"),
        f"{prefix}.retry.attempts": Used(RETRIES, "attempts"),
        f"{prefix}.retry.on": Used(RETRIES, "on"),
        f"{prefix}.restart": Used(f"{RETRIES}:retry_rule", "restart"),
    }


def _mount_rows(prefix: str, consumer: str = STEPS, reads: str = "volume") -> dict[str, Row]:
    return {
        f"{prefix}.*.volume": Used(consumer, reads),
        f"{prefix}.*": Used(f"{UPGRADE}:_read_short_mounts", "mounts"),
    }


def _step_rows(section: str) -> dict[str, Row]:
    """What jobs and services share."""
    step = f"{section}.*"
    rows: dict[str, Row] = {
        f"{step}.name": Warned(NAME_IGNORED),
        **_image_rows(f"{step}.image"),
        f"{step}.command": Used(STEPS, "command"),
        f"{step}.script": Used(CONTAINER_JOB, "script"),
        f"{step}.args": Used(STEPS, "args"),
        f"{step}.env": Used(STEPS, "env"),
        f"{step}.cwd": Used(STEPS, "cwd"),
        f"{step}.files.*": Used(CONTAINER_JOB, "files"),
        **_mount_rows(f"{step}.mounts"),
        f"{step}.mounts.*.location": Used(f"{UPGRADE}:_rekey_mounts", "location"),
        f"{step}.requires": Used(f"{UPGRADE}:_read_requires", "requires"),
        **_resource_rows(f"{step}.resource"),
        f"{step}.multinode.nodes": Used(f"{REQUESTS}:job_request", "nodes"),
        f"{step}.multinode.implementation": Used(
            f"{CAPABILITIES}:unlaunchable_ranks", "implementation"
        ),
        f"{step}.multinode.procs-per-node": Used(RANKS, "procs_per_node"),
        f"{step}.multinode.nvlink-domain": Used(f"{REQUESTS}:job_request", "nvlink_domain"),
        f"{step}.depends-on[].name": Used(PLAN, "name"),
        f"{step}.depends-on[].status": Used(PLAN, "status"),
        f"{step}.depends-on[].description": KEPT,
        f"{step}.preemptible": Warned(PREEMPT),
    }
    return rows


def _probe_rows(prefix: str, *, liveness: bool) -> dict[str, Row]:
    fields = [
        "exec.command",
        "http-get.path",
        "http-get.port",
        "http-get.scheme",
        "http-get.http-headers[].name",
        "http-get.http-headers[].value",
        "tcp-socket.port",
        "grpc.port",
        "grpc.service",
        "initial-delay-seconds",
        "period-seconds",
        "timeout-seconds",
        "success-threshold",
        "failure-threshold",
    ]
    if liveness:
        return {f"{prefix}.{field}": Refused(LIVENESS, at=prefix) for field in fields}
    reads = {
        "http-get.path": "path",
        "http-get.port": "port",
        "http-get.scheme": "scheme",
        "http-get.http-headers[].name": "name",
        "http-get.http-headers[].value": "value",
        "tcp-socket.port": "tcp_socket",
        "initial-delay-seconds": "initial_delay_seconds",
        "period-seconds": "period_seconds",
        "timeout-seconds": "timeout_seconds",
        "success-threshold": "success_threshold",
    }
    rows: dict[str, Row] = {f"{prefix}.{field}": Used(PROBES, reads[field]) for field in reads}
    rows[f"{prefix}.exec.command"] = Refused(PROBE_ACTION, at=f"{prefix}.exec")
    rows[f"{prefix}.grpc.port"] = Refused(PROBE_ACTION, at=f"{prefix}.grpc")
    rows[f"{prefix}.grpc.service"] = Refused(PROBE_ACTION, at=f"{prefix}.grpc")
    rows[f"{prefix}.failure-threshold"] = Warned(
        "has no effect here; a readiness probe is tried until it passes"
    )
    return rows


def _egress_rows(prefix: str) -> dict[str, Row]:
    rows: dict[str, Row] = {
        f"{prefix}.source.uri": Used(EGRESS_STAGE, "source"),
        f"{prefix}.destination.uri": Used(EGRESS_STAGE, "destination"),
        # the reference; the node gets the s3 secret's credentials as the run starts
        f"{prefix}.destination.secret": Used(EGRESS_STAGE, "secret"),
        f"{prefix}.policy.retry.attempts": Used(EGRESS_STAGE, "attempts"),
    }
    for field in ("secret", "secrets", "decryption-secret", "cache", "cache-ttl"):
        star = ".*" if field == "secrets" else ""
        rows[f"{prefix}.source.{field}{star}"] = Refused(
            EGRESS_SOURCE, at=f"{prefix}.source.{field}"
        )
    for field in ("secrets", "decryption-secret"):
        star = ".*" if field == "secrets" else ""
        rows[f"{prefix}.destination.{field}{star}"] = Refused(
            "is not read here; give the s3 secret in secret", at=f"{prefix}.destination.{field}"
        )
    for field in ("cache", "cache-ttl"):
        rows[f"{prefix}.destination.{field}"] = Refused(
            "has no meaning here: every egress sends the file"
        )
    rows[f"{prefix}.policy.timeout.execute"] = Refused(
        "a transfer runs until it ends or stalls for 60 seconds; no timeout applies",
        at=f"{prefix}.policy.timeout",
    )
    rows[f"{prefix}.policy.retry.on"] = Refused("any failure of a transfer is tried again here")
    rows[f"{prefix}.policy.restart"] = Refused(
        "a transfer is tried again only per policy.retry.attempts"
    )
    return rows


def _transfer_rows(prefix: str, *, egress: bool) -> dict[str, Row]:
    fields = [
        f"{end}.{field}"
        for end in ("source", "destination")
        for field in ("uri", "secret", "secrets.*", "decryption-secret", "cache", "cache-ttl")
    ]
    fields += ["policy.timeout.execute", "policy.retry.attempts", "policy.retry.on"]
    fields += ["policy.restart"]
    if egress:
        return _egress_rows(prefix)
    rows: dict[str, Row] = {
        f"{prefix}.source.uri": Used(f"{REQUESTS}:volume_ingress_json", "source"),
        f"{prefix}.destination.uri": Used(f"{REQUESTS}:volume_ingress_json", "destination"),
        # the reference; the node gets its Authorization header as the run starts
        f"{prefix}.source.secret": Used(f"{REQUESTS}:volume_ingress_json", "secret"),
    }
    for field in ("secret", "secrets", "decryption-secret"):
        star = ".*" if field == "secrets" else ""
        if field != "secret":
            rows[f"{prefix}.source.{field}{star}"] = Refused(
                SECRETS_REFUSED, at=f"{prefix}.source.{field}"
            )
        rows[f"{prefix}.destination.{field}{star}"] = Warned(
            DESTINATION, at=f"{prefix}.destination.{field}"
        )
    for field in ("cache", "cache-ttl"):
        rows[f"{prefix}.source.{field}"] = Warned(INGRESS_CACHE)
        rows[f"{prefix}.destination.{field}"] = Warned(DESTINATION)
    rows[f"{prefix}.policy.retry.attempts"] = Used(f"{REQUESTS}:_retries", "attempts")
    rows[f"{prefix}.policy.timeout.execute"] = Warned(
        "has no effect here; a transfer runs until it ends or stalls for 60 seconds",
        at=f"{prefix}.policy.timeout",
    )
    rows[f"{prefix}.policy.retry.on"] = Warned(
        "has no effect here; any failure of a transfer is retried (retry.attempts more tries)"
    )
    rows[f"{prefix}.policy.restart"] = Warned(
        "has no effect here; a transfer is retried up to policy.retry.attempts more times"
    )
    return rows


TABLE: dict[str, Row] = {
    "version": Used(f"{UPGRADE}:normalize_document", "version"),
    "preemptible": Warned(PREEMPT),
    "annotations.*": Warned(
        "kept and shown with the workflow, but no placement here reads them; a job's or "
        "service's resource.annotations place it",
        at="annotations",
    ),
    "completed.status": Warned(
        "ignored; an internal anchor of Fuzzball's API, not for workflows", at="completed"
    ),
    "files.*": Used(f"{REQUESTS}:job_payload", "files"),
    # defaults: merged into each step (fuzzball_core.spec.defaults), then used as the step's own
    "defaults.env": Used(DEFAULTS, "env"),
    **_mount_rows("defaults.mounts", DEFAULTS, "mounts"),
    **_resource_rows("defaults.resource", defaults=True),
    "defaults.job.env": Used(DEFAULTS, "env"),
    **_mount_rows("defaults.job.mounts", DEFAULTS, "mounts"),
    "defaults.job.mounts.*.location": Used(f"{UPGRADE}:_rekey_mounts", "location"),
    **{
        path: Used(DEFAULTS, "policy") if isinstance(row, Used) else row
        for path, row in _policy_rows("defaults.job.policy").items()
    },
    **_resource_rows("defaults.job.resource", defaults=True),
    "defaults.service.env": Used(DEFAULTS, "env"),
    **_mount_rows("defaults.service.mounts", DEFAULTS, "mounts"),
    **_resource_rows("defaults.service.resource", defaults=True),
    # volumes: every volume here is a directory each node makes for its workflow
    "volumes.*.name": Used(VOLUME_KIND, "name"),
    "volumes.*.type": Used(VOLUME_KIND, "type"),
    "volumes.*.reference": Used(VOLUME_KIND, "reference"),
    "volumes.*.use": Used(VOLUME_KIND, "use"),
    "volumes.*.path": Refused(
        "host volumes are not supported here; use a storage class of the hostpath driver"
        " (volume://user/CLASS/NAME)"
    ),
    "volumes.*.size": Warned("has no effect here; volumes are directories on a node's disk"),
    "volumes.*.annotations.*": Warned(
        "has no effect here; this cluster has no storage provisioners to choose from",
        at="volumes.*.annotations",
    ),
    **_transfer_rows("volumes.*.ingress[]", egress=False),
    **_transfer_rows("volumes.*.egress[]", egress=True),
    # images the workflow builds
    **_image_rows("images.*.from"),
    "images.*.files.*": Used(IMAGE_STAGES, "files"),
    "images.*.post": Used(IMAGE_STAGES, "post"),
    "images.*.scope": Used(IMAGE_STAGES, "scope"),
    "images.*.ttl": Used(IMAGE_STAGES, "ttl"),
    # jobs
    **_step_rows("jobs"),
    **_policy_rows("jobs.*.policy"),
    "jobs.*.task-array.start": Used("fuzzball_core.spec.plan:_step_stage", "start"),
    "jobs.*.task-array.end": Used("fuzzball_core.spec.plan:_step_stage", "end"),
    "jobs.*.task-array.concurrency": Used("fuzzball_core.spec.plan:_step_stage", "concurrency"),
    "jobs.*.network.isolated": Used(NETWORK, "isolated"),
    "jobs.*.network.expose-tcp": Used(NETWORK, "expose_tcp"),
    "jobs.*.network.expose-udp": Used(NETWORK, "expose_udp"),
    # services
    **_step_rows("services"),
    "services.*.network.host": Used(f"{CAPABILITIES}:unsupported_step_fields", "host"),
    "services.*.network.ports[].name": Used(
        "fuzzball_core.spec.references:_check_endpoints", "name"
    ),
    "services.*.network.ports[].port": Used(f"{RESOURCES}:host_ports", "port"),
    "services.*.network.ports[].protocol": Used(f"{RESOURCES}:host_ports", "protocol"),
    **{
        f"services.*.network.endpoints[].{field}": Used(
            "fuzzball_core.orchestrate.endpoints:_of_service", field.replace("-", "_")
        )
        for field in ("name", "port-name", "protocol", "type", "scope", "persistent")
    },
    "services.*.persist": Used("fuzzball_core.orchestrate.services:stop_after_jobs", "persist"),
    **_probe_rows("services.*.readiness-probe", liveness=False),
    **_probe_rows("services.*.liveness-probe", liveness=True),
    "services.*.scale.min": Used("fuzzball_core.orchestrate.service_pools:scales_to_zero", "min"),
    "services.*.scale.max": Warned(
        "above 1 has no effect here; a service runs one instance (or none, with min 0)"
    ),
    "services.*.scale.idle-timeout": Used(
        "fuzzball_core.orchestrate.service_pools:idle_timeout", "idle_timeout"
    ),
    "services.*.autoscaler.**": Refused(
        "autoscaling is not supported here yet (one instance)", at="services.*.autoscaler"
    ),
    "services.*.dynamic-config.**": Refused(
        "rendered config files are not supported here yet", at="services.*.dynamic-config"
    ),
    "services.*.policy.**": Warned(
        "services have no execution policy; ignored", at="services.*.policy"
    ),
}

# --- the fields Fuzzball defines and the fields this parser reads ------------------------------


def _kebab(name: str) -> str:
    """A swagger (proto JSON) name as the workflow file writes it: ``byCore`` -> ``by-core``."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", lambda m: "-" + m.group(1).lower(), name)


def swagger_fields(definitions: dict[str, Any]) -> set[str]:
    """Every field of the swagger's ``WorkflowDefinition``, walked from its definitions."""
    found: set[str] = set()

    def ref(schema: dict[str, Any]) -> str:
        return schema["$ref"].rsplit("/", 1)[-1]

    def walk(name: str, prefix: str, seen: tuple[str, ...]) -> None:
        assert name not in seen, f"{prefix}: recursive definition {name}"
        for field, schema in definitions[name].get("properties", {}).items():
            path = f"{prefix}{_kebab(field)}"
            items, values = schema.get("items", {}), schema.get("additionalProperties")
            if "$ref" in schema:
                walk(ref(schema), f"{path}.", (*seen, name))
            elif "$ref" in items:
                walk(ref(items), f"{path}[].", (*seen, name))
            elif isinstance(values, dict) and "$ref" in values:
                walk(ref(values), f"{path}.*.", (*seen, name))
            elif values is not None:
                found.add(f"{path}.*")
            else:
                found.add(path)

    walk("fuzzball.api.v3.WorkflowDefinition", "", ())
    return found


def _unwrapped(annotation: Any) -> Any:
    """``X | None`` and ``Annotated[X, ...]`` as ``X``."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            options = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(options) != 1:
                return annotation  # a union of scalars (a retry cause): a leaf
            annotation = options[0]
        else:
            return annotation


def model_fields(model: type = Workflow, prefix: str = "") -> set[str]:
    """Every field the v4 model reads, named as the table names them."""
    found: set[str] = set()
    for name, info in model.model_fields.items():  # type: ignore[attr-defined]
        path = f"{prefix}{info.alias or name}"
        annotation = _unwrapped(info.annotation)
        origin, arguments = typing.get_origin(annotation), typing.get_args(annotation)
        if annotation is Any:
            found.add(f"{path}.**")
        elif isinstance(annotation, type) and hasattr(annotation, "model_fields"):
            found |= model_fields(annotation, f"{path}.")
        elif origin is list and hasattr(_unwrapped(arguments[0]), "model_fields"):
            found |= model_fields(_unwrapped(arguments[0]), f"{path}[].")
        elif origin is dict:
            values = _unwrapped(arguments[1])
            if values is Any:
                found.add(f"{path}.**")
            elif hasattr(values, "model_fields"):
                found |= model_fields(values, f"{path}.*.")
            else:
                found.add(f"{path}.*")
        else:
            found.add(path)
    return found


#: Forms of Fuzzball v4 the model does not show: a mount given as the volume's name alone.
SHORT_FORMS = {
    "defaults.mounts.*",
    "defaults.job.mounts.*",
    "defaults.service.mounts.*",
    "jobs.*.mounts.*",
    "services.*.mounts.*",
}

# --- the files that set every field --------------------------------------------------------

Segments = tuple[str | int, ...]


def _leaves(value: Any, where: Segments = ()) -> Iterator[tuple[Segments, Any]]:
    """(path, value) of every scalar or list of scalars in a loaded document."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, (*where, key))
    elif isinstance(value, list) and any(isinstance(item, dict | list) for item in value):
        for index, item in enumerate(value):
            yield from _leaves(item, (*where, index))
    else:
        yield where, value


def _pattern(text: str) -> tuple[str, ...]:
    """``jobs.*.depends-on[].name`` as ``("jobs", "*", "depends-on", "[]", "name")``."""
    parts: list[str] = []
    for segment in text.split("."):
        parts += [segment.removesuffix("[]"), "[]"] if segment.endswith("[]") else [segment]
    return tuple(parts)


def _matches(pattern: tuple[str, ...], where: Segments) -> bool:
    if pattern and pattern[-1] == "**":
        return len(where) > len(pattern) - 1 and _matches(pattern[:-1], where[: len(pattern) - 1])
    if len(pattern) != len(where):
        return False
    for wanted, part in zip(pattern, where, strict=True):
        if wanted == "[]":
            if not isinstance(part, int):
                return False
        elif wanted != "*" and wanted != part:
            return False
    return True


def _text(where: Segments) -> str:
    text = ""
    for part in where:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


@dataclass(frozen=True)
class Reading:
    """One every-field file: its leaves, and what reading and submitting it says."""

    leaves: list[tuple[Segments, Any]]
    parsed: ParsedWorkflow
    refusals: list[tuple[str, str]]

    def at(self, row: str) -> list[Segments]:
        """The concrete paths of ``row`` in this file."""
        pattern = _pattern(row)
        return [where for where, _ in self.leaves if _matches(pattern, where)]

    def warned_paths(self) -> set[str]:
        return {warning.partition(": ")[0] for warning in self.parsed.warnings}


@cache
def reading(name: str) -> Reading:
    text = (FIXTURES / name).read_text()
    parsed = parse_workflow(text)
    refusals = [problem for stage in plan_workflow(parsed) for problem in refused_fields(stage)]
    return Reading(list(_leaves(load_document(text))), parsed, refusals)


def occurrences(row: str) -> list[tuple[Reading, Segments]]:
    """Where the every-field files set ``row``."""
    return [(reading(name), where) for name in EVERY_FIELD_FILES for where in reading(name).at(row)]


def reported_path(row: str, at: str | None, where: Segments) -> str:
    """The concrete field a warning or refusal about ``where`` (a path of ``row``) names."""
    return _text(where[: len(_pattern(at or row))])


def _resolve(consumer: str) -> Any:
    module, _, qualified = consumer.partition(":")
    found: Any = importlib.import_module(module)
    for part in qualified.split(".") if qualified else ():
        found = getattr(found, part)
    return found.fget if isinstance(found, property) else found


def _rows(kind: type) -> list[str]:
    return [path for path, row in TABLE.items() if isinstance(row, kind)]


# --- the tests ------------------------------------------------------------------------------


def test_every_field_of_fuzzballs_workflow_definition_is_classified(
    definitions: dict[str, Any],
) -> None:
    assert sorted(swagger_fields(definitions) - TABLE.keys()) == []


def test_every_field_the_parser_reads_is_classified() -> None:
    def classified(field: str) -> bool:
        return field in TABLE or (
            field.endswith(".**") and any(row.startswith(field[:-2]) for row in TABLE)
        )

    assert sorted(f for f in model_fields() | SHORT_FORMS if not classified(f)) == []


def test_every_camel_case_name_of_the_swagger_is_read_as_its_file_name(
    definitions: dict[str, Any],
) -> None:
    camel = {
        field
        for name, definition in definitions.items()
        if name.startswith("fuzzball.api.v3.WorkflowDefinition")
        for field in definition.get("properties", {})
        if field != field.lower()
    }
    assert {field: _kebab(field) for field in camel} == API_SPELLINGS


def test_the_table_names_only_fields_fuzzball_defines_or_the_parser_reads(
    definitions: dict[str, Any],
) -> None:
    known = swagger_fields(definitions) | model_fields() | SHORT_FORMS
    assert sorted(TABLE.keys() - known) == []


def test_the_every_field_files_set_every_field_of_the_table() -> None:
    assert sorted(row for row in TABLE if not occurrences(row)) == []


def test_the_every_field_files_set_no_field_the_table_lacks() -> None:
    patterns = [_pattern(row) for row in TABLE]
    for name in EVERY_FIELD_FILES:
        unclassified = [
            _text(where)
            for where, _ in reading(name).leaves
            if not any(_matches(pattern, where) for pattern in patterns)
        ]
        assert unclassified == [], name


@pytest.mark.parametrize("row", _rows(Used))
def test_a_used_field_is_read_by_its_consumer_without_warning_or_refusal(row: str) -> None:
    used = TABLE[row]
    assert isinstance(used, Used)
    consumer = _resolve(used.consumer)
    if used.reads is not None:
        assert re.search(rf"\b{used.reads}\b", inspect.getsource(consumer)), used.consumer
    for found, where in occurrences(row):
        path = _text(where)
        assert path not in found.warned_paths()
        assert path not in {field for field, _ in found.refusals}
        if used.reads is None:  # kept: the stored definition carries it as written
            value = dict(found.leaves)[where]
            assert str(value) in found.parsed.to_yaml()


@pytest.mark.parametrize("row", _rows(Warned))
def test_a_field_without_effect_here_is_accepted_with_a_warning_saying_so(row: str) -> None:
    warned = TABLE[row]
    assert isinstance(warned, Warned)
    for found, where in occurrences(row):
        assert f"{reported_path(row, warned.at, where)}: {warned.text}" in found.parsed.warnings


@pytest.mark.parametrize("row", _rows(Refused))
def test_a_field_this_cluster_cannot_carry_out_is_refused_at_submission(row: str) -> None:
    refused = TABLE[row]
    assert isinstance(refused, Refused)
    for found, where in occurrences(row):
        assert (reported_path(row, refused.at, where), refused.text) in found.refusals


def test_docs_list_every_field_accepted_with_a_warning_and_its_reason() -> None:
    docs = DOCS.read_text()
    missing = [
        rule.pattern for rule in NO_EFFECT if f"`{rule.pattern}` | {rule.reason}" not in docs
    ]
    assert missing == []


def test_docs_list_every_field_refused_at_submission() -> None:
    docs = DOCS.read_text()
    refused = {row.at or path for path, row in TABLE.items() if isinstance(row, Refused)}
    assert sorted(path for path in refused if f"`{path}`" not in docs) == []
