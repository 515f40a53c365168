"""Applying ``defaults`` to the steps of a workflow.

Three levels, the nearer winning: ``defaults`` itself (``env``, ``mounts``, ``resource``;
Fuzzball v4, for jobs and services alike), then ``defaults.job`` for jobs (and its ``env``,
``mounts`` and ``resource`` for services, as before ``defaults.service`` existed), then
``defaults.service`` for services, then the step's own values.

``env`` merges by variable name, ``mounts`` by path, ``resource`` field by field
(``devices`` and ``annotations`` by key). ``policy`` merges field by field except ``retry``,
which is inherited whole and only by jobs that declare neither ``retry`` nor ``restart``
(Fuzzball 4.4). Services never take ``policy``, since services have no execution policy.
"""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel

from fuzzball_core.spec.models import (
    DefaultJob,
    DefaultSteps,
    Job,
    Policy,
    Retry,
    Service,
    Workflow,
)

#: The fields of a step ``apply_defaults`` merges field by field, building values no
#: validator saw (``env`` and ``mounts`` only gain entries validated where they are written).
MERGED_MODELS = ("resource", "policy")

_Model = TypeVar("_Model", bound=BaseModel)
_Step = TypeVar("_Step", Job, Service)


def merge_env(defaults: list[str] | None, own: list[str] | None) -> list[str] | None:
    """Defaults first, minus variables the step sets itself, then the step's own entries."""
    if not defaults:
        return own
    if not own:
        return list(defaults)
    own_keys = {entry.partition("=")[0] for entry in own}
    return [e for e in defaults if e.partition("=")[0] not in own_keys] + list(own)


def merge_models(defaults: _Model | None, own: _Model | None) -> _Model | None:
    """Field-by-field merge of two models of one type; ``own``'s set fields win.

    Nested models merge recursively, dicts merge by key, a ``Retry`` is taken whole.
    """
    if defaults is None:
        return own
    if own is None:
        return defaults
    update = {}
    for name in type(own).model_fields:
        mine, inherited = getattr(own, name), getattr(defaults, name)
        if inherited is None:
            continue
        if mine is None:
            update[name] = inherited
        elif isinstance(mine, BaseModel) and not isinstance(mine, Retry):
            update[name] = merge_models(inherited, mine)
        elif isinstance(mine, dict) and isinstance(inherited, dict):
            update[name] = {**inherited, **mine}
    return own.model_copy(update=update) if update else own


def _inheritable(defaults: Policy, own: Policy | None) -> Policy:
    """The part of a default ``policy`` a job inherits: ``retry`` and ``restart`` say one
    thing (whether a run is tried again), so a job declaring either inherits neither."""
    if own is None or (own.retry is None and own.restart is None):
        return defaults
    return defaults.model_copy(update={"retry": None, "restart": None})


def apply_defaults(step: _Step, defaults: DefaultJob | None) -> _Step:
    """Return ``step`` with ``defaults`` applied (the step itself is not modified)."""
    if defaults is None:
        return step
    update: dict[str, object] = {}
    env = merge_env(defaults.env, step.env)
    if env is not step.env:
        update["env"] = env
    if defaults.mounts:
        update["mounts"] = {**defaults.mounts, **(step.mounts or {})}
    if defaults.resource is not None:
        update["resource"] = merge_models(defaults.resource, step.resource)
    if isinstance(step, Job) and defaults.policy is not None:
        update["policy"] = merge_models(_inheritable(defaults.policy, step.policy), step.policy)
    return step.model_copy(update=update) if update else step


def combine_defaults(outer: DefaultSteps | None, inner: DefaultSteps | None) -> DefaultJob | None:
    """One ``DefaultJob`` from two levels of defaults, ``inner``'s values winning (a level
    that is not a ``DefaultJob`` brings no policy)."""
    if outer is None and inner is None:
        return None
    if outer is None and isinstance(inner, DefaultJob):
        return inner
    levels = (outer or DefaultSteps(), inner or DefaultSteps())
    return DefaultJob(
        env=merge_env(levels[0].env, levels[1].env),
        mounts={**(levels[0].mounts or {}), **(levels[1].mounts or {})} or None,
        resource=merge_models(levels[0].resource, levels[1].resource),
        policy=merge_models(getattr(outer, "policy", None), getattr(inner, "policy", None)),
    )


def _common(workflow: Workflow) -> DefaultSteps | None:
    """``defaults``' own env, mounts and resource, or None when it sets none of them."""
    defaults = workflow.defaults
    if defaults is None or (defaults.env, defaults.mounts, defaults.resource) == (None,) * 3:
        return None
    return DefaultSteps(env=defaults.env, mounts=defaults.mounts, resource=defaults.resource)


def job_defaults(workflow: Workflow) -> DefaultJob | None:
    """What every job of ``workflow`` inherits."""
    job = workflow.defaults.job if workflow.defaults else None
    return combine_defaults(_common(workflow), job)


def service_defaults(workflow: Workflow) -> DefaultJob | None:
    """What every service of ``workflow`` inherits (``apply_defaults`` never gives a
    service ``policy``)."""
    defaults = workflow.defaults
    service = defaults.service if defaults else None
    return combine_defaults(job_defaults(workflow), service)


def effective_jobs(workflow: Workflow) -> dict[str, Job]:
    """Every job of ``workflow`` with its defaults applied, in file order."""
    defaults = job_defaults(workflow)
    return {name: apply_defaults(job, defaults) for name, job in (workflow.jobs or {}).items()}


def effective_services(workflow: Workflow) -> dict[str, Service]:
    """Every service of ``workflow`` with its defaults' env, mounts and resource applied."""
    defaults = service_defaults(workflow)
    return {
        name: apply_defaults(service, defaults)
        for name, service in (workflow.services or {}).items()
    }
