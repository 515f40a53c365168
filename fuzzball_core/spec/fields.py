"""Fields real Fuzzball takes that have no effect on this cluster: accepted, with a warning.

A workflow written for Fuzzball v4 must run here unchanged wherever it can, so every field the
real server takes is read (``fuzzball_core.spec.models``). Each one is then either used,
accepted with a warning saying it has no effect here (the rules below), or refused at
submission with the reason (``fuzzball_core.orchestrate.capabilities``), never dropped in
silence. ``docs/fields.md`` publishes this list; ``tests/spec/test_spec_fields.py`` holds every
field of Fuzzball's ``WorkflowDefinition`` to one of the three.

A rule names its fields with a pattern over the v4 model: segments are the file's field names,
``*`` stands for any key of a mapping (a job's name, a volume's name) and ``NAME[]`` for every
item of the list ``NAME``. Rules are checked on the typed model, so ``preemptible: "true"``
and ``preemptible: yes`` are both true.

One warning depends on another field of the step: an ``env`` entry naming a variable Open
MPI's launch sets itself (``fuzzball_core.spec.multinode``) has no effect only in an Open MPI
multinode job (:func:`open_mpi_launch_env_warnings`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

from pydantic import BaseModel

from fuzzball_core.spec.models import Job, Service, Workflow
from fuzzball_core.spec.multinode import OPEN_MPI_LAUNCH_ENV, is_open_mpi

#: Segments of a concrete field path: field names, mapping keys and list indexes.
Where = tuple[str | int, ...]


def _always(value: Any, where: Where) -> bool:
    return True


def _true(value: Any, where: Where) -> bool:
    return value is True


def _not_the_key(value: Any, where: Where) -> bool:
    # ``jobs.a.name: a`` says what the key already says; only another name is ignored
    return value != where[-2]


@dataclass(frozen=True)
class NoEffect:
    """Fields accepted with a warning: where (a pattern), why, and for which values."""

    pattern: str
    #: What the warning says after the field's path.
    reason: str
    #: Whether a value found at the pattern is warned about (some values are what this
    #: cluster does anyway, such as ``persist: false``).
    applies: Callable[[Any, Where], bool] = _always


_PREEMPT = "has no effect here; this cluster never preempts work"
_NAME = "ignored; the key names it"
_IMAGE_CACHE = (
    "has no effect on images here; cache-ttl sets how long a pin of the image may be reused"
)
_INGRESS_CACHE = "has no effect here; an ingress file is fetched from its source every time"
_DESTINATION_SECRET = "has no effect here; the destination is a file inside the volume"
_WORKFLOW_ANNOTATIONS = (
    "kept and shown with the workflow, but no placement here reads them; a job's or "
    "service's resource.annotations place it"
)
_ONE_INSTANCE = "above 1 has no effect here; a service runs one instance (or none, with min 0)"


def _above_one(value: Any, _where: Where) -> bool:
    return isinstance(value, int) and value > 1


#: Every field accepted with a warning that it has no effect here.
NO_EFFECT: tuple[NoEffect, ...] = (
    NoEffect("preemptible", _PREEMPT, _true),
    NoEffect("jobs.*.preemptible", _PREEMPT, _true),
    NoEffect("services.*.preemptible", _PREEMPT, _true),
    NoEffect("completed", "ignored; an internal anchor of Fuzzball's API, not for workflows"),
    NoEffect("annotations", _WORKFLOW_ANNOTATIONS),
    NoEffect("jobs.*.name", _NAME, _not_the_key),
    NoEffect("services.*.name", _NAME, _not_the_key),
    NoEffect("jobs.*.image.cache", _IMAGE_CACHE),
    NoEffect("services.*.image.cache", _IMAGE_CACHE),
    NoEffect("images.*.from.cache", _IMAGE_CACHE),
    NoEffect("volumes.*.size", "has no effect here; volumes are directories on a node's disk"),
    NoEffect(
        "volumes.*.annotations",
        "has no effect here; this cluster has no storage provisioners to choose from",
    ),
    NoEffect("volumes.*.ingress[].source.cache", _INGRESS_CACHE),
    NoEffect("volumes.*.ingress[].source.cache-ttl", _INGRESS_CACHE),
    NoEffect("volumes.*.ingress[].destination.secret", _DESTINATION_SECRET),
    NoEffect("volumes.*.ingress[].destination.secrets", _DESTINATION_SECRET),
    NoEffect("volumes.*.ingress[].destination.decryption-secret", _DESTINATION_SECRET),
    NoEffect("volumes.*.ingress[].destination.cache", _DESTINATION_SECRET),
    NoEffect("volumes.*.ingress[].destination.cache-ttl", _DESTINATION_SECRET),
    NoEffect(
        "volumes.*.ingress[].policy.timeout",
        "has no effect here; a transfer runs until it ends or stalls for 60 seconds",
    ),
    NoEffect(
        "volumes.*.ingress[].policy.retry.on",
        "has no effect here; any failure of a transfer is retried (retry.attempts more tries)",
    ),
    NoEffect(
        "volumes.*.ingress[].policy.restart",
        "has no effect here; a transfer is retried up to policy.retry.attempts more times",
    ),
    NoEffect("services.*.scale.min", _ONE_INSTANCE, _above_one),
    NoEffect("services.*.scale.max", _ONE_INSTANCE, _above_one),
    NoEffect(
        "services.*.readiness-probe.failure-threshold",
        "has no effect here; a readiness probe is tried until it passes",
    ),
)


def no_effect_warnings(workflow: Workflow) -> list[tuple[str, str]]:
    """(field path, reason) for each field of ``workflow`` that has no effect here."""
    found = []
    for rule in NO_EFFECT:
        for where, value in find(workflow, rule.pattern):
            if value is not None and rule.applies(value, where):
                found.append((path_text(where), rule.reason))
    return found + open_mpi_launch_env_warnings(workflow)


def _launch_env_reason(name: str) -> str:
    return (
        f"has no effect on an Open MPI multinode job here: its launch sets {name} itself "
        "(mpirun reaches the other nodes' containers through Fuzzball's agent)"
    )


def open_mpi_launch_env_warnings(workflow: Workflow) -> list[tuple[str, str]]:
    """(field path, reason) for each ``env`` entry that names a variable an Open MPI job's
    launch sets itself (``OPEN_MPI_LAUNCH_ENV``): in such a job or service, or in the
    ``defaults`` one inherits. The reason names the variable, never its value."""
    steps: list[tuple[Where, Job | Service]] = [
        (("jobs", name), job) for name, job in (workflow.jobs or {}).items()
    ]
    steps += [(("services", name), service) for name, service in (workflow.services or {}).items()]
    open_mpi = [(where, step) for where, step in steps if is_open_mpi(step)]
    if not open_mpi:
        return []
    envs: list[tuple[Where, list[str] | None]] = [
        ((*where, "env"), step.env) for where, step in open_mpi
    ]
    defaults = workflow.defaults
    if defaults is not None:
        # defaults.env and defaults.job.env reach jobs and services, defaults.service.env
        # services alone
        envs.append((("defaults", "env"), defaults.env))
        if defaults.job is not None:
            envs.append((("defaults", "job", "env"), defaults.job.env))
        if defaults.service is not None and any(where[0] == "services" for where, _ in open_mpi):
            envs.append((("defaults", "service", "env"), defaults.service.env))
    found = []
    for where, env in envs:
        for index, entry in enumerate(env or ()):
            name = entry.partition("=")[0]
            if name in OPEN_MPI_LAUNCH_ENV:
                found.append((path_text((*where, index)), _launch_env_reason(name)))
    return found


def find(model: BaseModel, pattern: str) -> Iterator[tuple[Where, Any]]:
    """Every (concrete path, value) of ``model`` that ``pattern`` names and that is set."""
    yield from _find(model, (), _segments(pattern))


def path_text(where: Where) -> str:
    """``("jobs", "a", "mounts")`` as ``jobs.a.mounts``; list indexes as ``[0]``."""
    text = ""
    for part in where:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else part
    return text


@cache
def _segments(pattern: str) -> tuple[tuple[str, bool], ...]:
    """A pattern as (name, each item of a list) pairs."""
    return tuple(
        (segment.removesuffix("[]"), segment.endswith("[]")) for segment in pattern.split(".")
    )


@cache
def _attribute_names(model: type[BaseModel]) -> dict[str, str]:
    """The file's field names of ``model`` -> its attribute names."""
    return {(info.alias or name): name for name, info in model.model_fields.items()}


def _find(
    value: Any, where: Where, segments: tuple[tuple[str, bool], ...]
) -> Iterator[tuple[Where, Any]]:
    if value is None:
        return
    if not segments:
        yield where, value
        return
    (name, each), rest = segments[0], segments[1:]
    if name == "*":
        if isinstance(value, dict):
            for key, item in value.items():
                yield from _find(item, (*where, key), rest)
        return
    if isinstance(value, BaseModel):
        attribute = _attribute_names(type(value)).get(name)
        child = getattr(value, attribute) if attribute is not None else None
    elif isinstance(value, dict):
        child = value.get(name)
    else:
        return
    if not each:
        yield from _find(child, (*where, name), rest)
    elif isinstance(child, list):
        for index, item in enumerate(child):
            yield from _find(item, (*where, name, index), rest)
