"""Accepting a workflow: plan it, pin its images, refuse what this cluster cannot run, and
store it with its stages.

:func:`prepare` does the slow part (registry round trips) and touches no engine state, so
the transports run it off the event loop; :func:`store` writes workflows in the caller's
transaction.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Table, insert

from fuzzball_core.drivers import ResolvedImage
from fuzzball_core.errors import InvalidArgument
from fuzzball_core.orchestrate import events, workflow_volumes
from fuzzball_core.orchestrate.capabilities import (
    commandless,
    refused_fields,
)
from fuzzball_core.orchestrate.context import EngineContext
from fuzzball_core.orchestrate.requests import job_request
from fuzzball_core.orchestrate.run_secrets import reference_problems
from fuzzball_core.orchestrate.transaction import Transaction
from fuzzball_core.scheduling import JobRequest
from fuzzball_core.service.views import Principal
from fuzzball_core.spec import ParsedWorkflow, Plan, StageKind
from fuzzball_core.store.models import Stage, Workflow
from fuzzball_core.vocabulary import EventKind, Status

#: The stages table, for its Core INSERT (a mapped class's ``__table__`` is typed loosely).
_STAGES = cast(Table, Stage.__table__)
#: The workflows table, for its Core INSERT.
_WORKFLOWS = cast(Table, Workflow.__table__)

#: Threads preparing submissions off the event loop (:func:`preparers`).
PREPARE_THREADS = 16
_preparer_pool: ThreadPoolExecutor | None = None
_preparer_lock = threading.Lock()


def preparers() -> ThreadPoolExecutor:
    """The threads the transports run :func:`prepare` in (with the parse before it).

    A pool of its own, wider than the event loop's default executor (the cores plus four):
    a preparation mostly waits for its registry round trip, and the pins of one image asked
    for while a round trip is under way share the next one, so the preparations in flight
    bound how many pins each round trip serves. Under 2,000 separate workflows submitted at
    once, 6 threads (two cores) made about 580 round trips and 16 about 230: 0.2-0.3 ms of
    Orchestrate's CPU less a workflow.
    """
    global _preparer_pool
    with _preparer_lock:
        if _preparer_pool is None:
            _preparer_pool = ThreadPoolExecutor(PREPARE_THREADS, thread_name_prefix="submission")
        return _preparer_pool


@dataclass(frozen=True)
class PreparedSubmission:
    """A workflow's plan and the digests its images were pinned to, before it is stored."""

    plan: Plan
    pins: dict[str, ResolvedImage]
    #: the workflow as v4 YAML, the row's ``definition_v4``: rendered here, in the transports'
    #: worker thread, rather than on the event loop while the workflow is stored
    definition_v4: str


def prepare(ctx: EngineContext, who: Principal, parsed: ParsedWorkflow) -> PreparedSubmission:
    """Plan a workflow and pin its images."""
    return _pinned(ctx, who, parsed, ctx.plans.plan(parsed))


def _pinned(
    ctx: EngineContext, who: Principal, parsed: ParsedWorkflow, plan: Plan
) -> PreparedSubmission:
    """``plan`` with its images pinned, once every job has something to run."""
    pins = ctx.plans.images.check_submission(plan, who.account_id, who)
    return check_commands(PreparedSubmission(plan, pins, parsed.to_yaml()))


def checked(
    ctx: EngineContext,
    who: Principal,
    parsed: ParsedWorkflow,
    prepared: PreparedSubmission | None,
) -> PreparedSubmission:
    """``prepared``, or the submission prepared now, once it passed :func:`check_feasible`."""
    if prepared is not None:
        check_feasible(ctx, prepared.plan)
        return prepared
    plan = ctx.plans.plan(parsed)
    check_feasible(ctx, plan)  # before any registry round trip: fail fast
    return _pinned(ctx, who, parsed, plan)


def check_commands(prepared: PreparedSubmission) -> PreparedSubmission:
    """``prepared``, once every job and service has something to run: its ``command`` or
    ``script``, or its pinned image's Entrypoint or Cmd. Raises InvalidArgument naming each
    ``command`` field that is missing."""
    problems = []
    for stage in prepared.plan:
        if stage.kind in (StageKind.JOB, StageKind.SERVICE):
            pin = prepared.pins.get(f"images.{stage.definition.image.uri}")
            problems.extend(commandless(stage.id, stage.definition, pin.config if pin else None))
    if problems:
        raise InvalidArgument(
            "; ".join(f"{path}: {message}" for path, message in problems),
            details=[{"field": p, "description": m} for p, m in problems],
        )
    return prepared


def infeasible(ctx: EngineContext, request: JobRequest) -> tuple[str, str] | None:
    """Why no node could ever hold ``request`` (the ``resource`` subfield, the message), or
    None. With provisioner definitions, a job one of them could hold is feasible, and a
    refusal lists why each definition was rejected."""
    diagnosis = ctx.scheduler.check_feasible(request) if ctx.node_names else None
    if ctx.node_names and diagnosis is None:
        return None
    field = f".{diagnosis.resource_field}" if diagnosis and diagnosis.resource_field else ""
    if ctx.provisioning is None or not ctx.provisioning.definitions:
        # no node has ever registered and none can be provisioned: nothing to judge against
        return None if diagnosis is None else (field, diagnosis.message)
    refusal = ctx.provisioning.refusal(request)
    if refusal is None:
        return None  # a provisioned node could hold it
    return field, refusal if diagnosis is None else f"{diagnosis.message}; {refusal}"


def check_feasible(ctx: EngineContext, plan: Plan) -> None:
    """Refuse, naming the fields, what this cluster cannot carry out: what it lacks
    (``capabilities.refused_fields``: storage, transfers, probes, rank launchers...), and
    jobs no registered node could hold even when idle."""
    problems = []
    for stage in plan:
        problems.extend(refused_fields(stage))
        problems.extend(reference_problems(stage))
        if stage.kind not in (StageKind.JOB, StageKind.SERVICE):
            continue
        problem = infeasible(ctx, job_request(0, stage.definition, submitted_at=0.0))
        if problem is not None:
            field, message = problem
            problems.append((f"{stage.id}.resource{field}", message))
    if problems:
        raise InvalidArgument(
            "; ".join(f"{path}: {message}" for path, message in problems),
            details=[{"field": p, "description": m} for p, m in problems],
        )


@dataclass(frozen=True)
class Submission:
    """A workflow to store: who submits it, as parsed and prepared, its text and its name."""

    who: Principal
    parsed: ParsedWorkflow
    prepared: PreparedSubmission
    raw_specification: str
    name: str


def store(tx: Transaction, submissions: Sequence[Submission]) -> list[str]:
    """Write the workflows (STARTED) and their stages (PENDING); return their ids in order.

    Each table is written with one statement for all of them (the workflows first: the
    stages' foreign key needs them), so several submissions in one transaction (a group
    commit) cost the statements of one.
    """
    # the tables' Core INSERTs, every row of each in one: nothing in this transaction reads
    # the rows back (the next pass reads each workflow with its stages), and the ORM's rows,
    # made, flushed and held, cost about a thirtieth of Orchestrate's samples under 2,000
    # separate workflows
    workflows = [_workflow_row(tx, submitted) for submitted in submissions]
    tx.session.execute(insert(_WORKFLOWS), workflows)
    stages = [
        row
        for submitted, workflow in zip(submissions, workflows, strict=True)
        for row in _stage_rows(tx, submitted.prepared.plan, workflow["id"])
    ]
    if stages:
        tx.session.execute(insert(_STAGES), stages)
    for submitted, workflow in zip(submissions, workflows, strict=True):
        _store_rest(tx, submitted, workflow["id"])
    return [workflow["id"] for workflow in workflows]


def _workflow_row(tx: Transaction, submitted: Submission) -> dict[str, Any]:
    """The new row of a submitted workflow."""
    return {
        "id": str(uuid.uuid4()),
        "account_id": submitted.who.account_id,
        "user_id": submitted.who.user_id,
        "name": submitted.name,
        "status": Status.STARTED,
        "raw_specification": submitted.raw_specification,
        "definition_v4": submitted.prepared.definition_v4,
        "error": "",
        "annotations": dict(submitted.parsed.model.annotations or {}),
        "created_at": tx.now,
        "started_at": tx.now,
        "finished_at": None,
    }


def _stage_rows(tx: Transaction, plan: Plan, workflow_id: str) -> list[dict[str, Any]]:
    """The rows of a new workflow's stages (PENDING), in the plan's order."""
    return [
        {
            "workflow_id": workflow_id,
            "name": stage_id,
            "kind": plan.stages[stage_id].kind.value,
            "status": Status.PENDING,
            "task_count": len(tasks) if (tasks := plan.stages[stage_id].tasks) else None,
            "created_at": tx.now,
        }
        for stage_id in plan.topological_order()
    ]


def _store_rest(tx: Transaction, submitted: Submission, workflow_id: str) -> None:
    """Add a stored workflow's volumes and first events to ``tx``."""
    parsed, name = submitted.parsed, submitted.name
    # persistent volumes are made on first use (or the submission refused naming them)
    if parsed.model.volumes:  # resolving none would still read the owner's account and user
        workflow = tx.session.get_one(Workflow, workflow_id)  # the one read: it declares some
        resolved = workflow_volumes.resolve_at_submission(
            tx.session, workflow, parsed.model.volumes, tx.now
        )
        workflow_volumes.refuse_multinode_on_one_node(
            {"jobs": parsed.model.jobs, "services": parsed.model.services}, resolved
        )
    events.record(
        tx, EventKind.WORKFLOW_STARTED, f"workflow {name} started", workflow_id=workflow_id
    )
    for stage_id, pin in submitted.prepared.pins.items():
        events.record(
            tx,
            EventKind.IMAGE_RESOLVED,
            f"{stage_id}: resolved to {pin.digest}"
            + (f" ({pin.platform})" if pin.platform else ""),
            workflow_id=workflow_id,
            stage_name=stage_id,
            uri=pin.uri,
            digest=pin.digest,
            size=pin.size,
            platform=pin.platform,
        )
