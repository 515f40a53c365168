"""Advancing workflows: which stages are ready, skipped or over, and starting ready ones.

A workflow is advanced in the pass after something changed it (a stage started or ended,
a service became ready): its plan says which stages may start and which can never run, and
once every stage has ended the workflow ends too.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from fuzzball_core.orchestrate import (
    egress_stage,
    events,
    image_stages,
    placement,
    runs,
    service_pools,
    services,
)
from fuzzball_core.orchestrate.context import EngineContext
from fuzzball_core.orchestrate.transaction import Transaction
from fuzzball_core.spec import Condition, ImagePull, Plan, StageKind
from fuzzball_core.spec import Stage as PlanStage
from fuzzball_core.spec.models import ImageBuild
from fuzzball_core.store.models import Stage, Workflow
from fuzzball_core.vocabulary import TERMINAL_STATUSES, EventKind, Status


def stages_of(session: Session, workflow_id: str) -> list[Stage]:
    """The workflow's stage rows."""
    return list(session.scalars(select(Stage).where(Stage.workflow_id == workflow_id)))


def advance(ctx: EngineContext, tx: Transaction, workflow_id: str) -> None:
    """Start the workflow's ready stages, skip the ones that can no longer run, and end it
    once every stage has ended."""
    workflow = tx.get(Workflow, workflow_id)
    if workflow is None or workflow.status in TERMINAL_STATUSES:
        return
    entry = ctx.plans.entry(workflow)
    stages = {stage.name: stage for stage in tx.stages_of(workflow_id)}
    ended: dict[str, set[str]] = {s: set() for s in TERMINAL_STATUSES}
    started: set[str] = set()
    for name, stage in stages.items():
        if stage.status in ended:
            ended[stage.status].add(name)
        elif stage.status == Status.STARTED or stage.id in ctx.dispatched:
            started.add(name)
    ready, skipped = entry.plan.advance(
        ended[Status.FINISHED],
        ended[Status.FAILED],
        ended[Status.CANCELED],
        started=started,
        running=services.running(ctx, entry, stages, started),
    )
    for name in skipped:
        reason = _skip_reason(entry.plan, name, stages)
        runs.end_stage(ctx, tx, stages[name], Status.CANCELED, reason)
    for name in ready:
        if entry.plan.stages[name].kind is StageKind.FILE and egress_stage.still_writing(
            tx, workflow_id, entry.plan, name, stages
        ):
            continue  # a service's container still stopping: its run's end advances us again
        _start_stage(ctx, tx, workflow, stages[name], entry.plan.stages[name])
    services.stop_after_jobs(ctx, tx, workflow_id, stages, entry)
    if all(stage.status in TERMINAL_STATUSES for stage in stages.values()):
        failed = [s for s in stages.values() if s.status == Status.FAILED]
        if failed:
            runs.end_workflow(
                ctx, tx, workflow, Status.FAILED, f"{failed[0].name} failed: {failed[0].message}"
            )
        else:
            runs.end_workflow(ctx, tx, workflow, Status.FINISHED, "")


def _start_stage(
    ctx: EngineContext, tx: Transaction, workflow: Workflow, stage: Stage, planned: PlanStage
) -> None:
    if planned.kind is StageKind.VOLUME:
        stage.started_at = tx.now
        runs.end_stage(ctx, tx, stage, Status.FINISHED, "volume ready")
        return
    if service_pools.hold_idle(ctx, stage, planned):
        return  # scaled to zero: a request through its endpoint starts it
    if isinstance(planned.definition, ImageBuild) and not _build_needed(
        ctx, tx, workflow, stage, planned
    ):
        return
    if isinstance(planned.definition, ImagePull) and _on_a_node_already(ctx, tx, workflow, stage):
        return
    if planned.tasks is not None:
        stage.next_task = planned.tasks.start
        placement.dispatch_tasks(ctx, tx, workflow, stage)
    else:
        placement.new_runs(ctx, tx, workflow, stage, [None])


def _build_needed(
    ctx: EngineContext, tx: Transaction, workflow: Workflow, stage: Stage, planned: PlanStage
) -> bool:
    """Whether a build stage needs a run: not when the object cache holds this very build
    (the stage finishes) or when there is no object cache to build into (it fails)."""
    build = planned.definition
    assert isinstance(build, ImageBuild)
    images = ctx.plans.images
    from_digest = ctx.plans.image_digest(tx, workflow, str(build.from_.uri))
    built = image_stages.definition_hash(build, from_digest)
    # builds are stored under the plan stage's name (the build target), not the stage id
    if images.cached_build(planned.name, build, workflow.account_id, built):
        _finish_cached(
            ctx,
            tx,
            stage,
            "unchanged definition served from the object cache",
            "served from the object cache",
            definition_hash=built,
        )
        return False
    if images.object_cache is None:
        stage.started_at = tx.now
        runs.end_stage(
            ctx,
            tx,
            stage,
            Status.FAILED,
            "workflow image builds need the object cache, which this Orchestrate does not hold",
        )
        return False
    return True


def _on_a_node_already(
    ctx: EngineContext, tx: Transaction, workflow: Workflow, stage: Stage
) -> bool:
    """Whether a pull stage's image, at the digest pinned at submission, is already on a
    live node (:class:`~fuzzball_core.orchestrate.image_stages.ImagesOnNodes`): then the
    stage finishes now, without a run, and the steps using the image start in this pass."""
    node_id = ctx.images_on_nodes.holder(ctx.plans.payload(tx, workflow, stage.name), ctx.leases)
    if node_id is None:
        return False
    where = ctx.node_names_of([node_id])
    _finish_cached(
        ctx,
        tx,
        stage,
        f"already pulled at this digest on node {where}",
        f"already on node {where}",
        node_id=node_id,
    )
    return True


def _finish_cached(
    ctx: EngineContext, tx: Transaction, stage: Stage, why: str, message: str, **data: Any
) -> None:
    """End an image stage FINISHED as it starts, without a run, with the ``image_cached``
    event saying ``why`` (its ``data`` too) and ``message`` as the stage's."""
    stage.started_at = tx.now
    events.record(
        tx,
        EventKind.IMAGE_CACHED,
        f"{stage.name}: {why}",
        workflow_id=stage.workflow_id,
        stage_name=stage.name,
        **data,
    )
    runs.end_stage(ctx, tx, stage, Status.FINISHED, message)


def _skip_reason(plan: Plan, name: str, stages: dict[str, Stage]) -> str:
    """Why ``name`` can never run, in the words of its depends-on."""
    for edge in plan.dependencies_of(name):
        source = stages.get(edge.source)
        status = source.status if source is not None else "?"
        if status == Status.CANCELED:
            return f"skipped: {edge.source} was canceled"
        if edge.condition is Condition.ON_FAILURE and status == Status.FINISHED:
            return f"skipped: {edge.source} finished, and this runs only if it fails"
        if edge.condition is not Condition.ON_FAILURE and status == Status.FAILED:
            return f"skipped: {edge.source} failed"
    return "skipped: its dependencies can no longer be met"


def stop(ctx: EngineContext, tx: Transaction, workflow: Workflow, reason: str) -> None:
    """Cancel every stage not yet ended and the workflow; running containers are told to
    stop."""
    for stage in stages_of(tx.session, workflow.id):
        if stage.status not in TERMINAL_STATUSES:
            runs.end_stage(ctx, tx, stage, Status.CANCELED, reason)
    runs.cancel_runs(ctx, tx, workflow.id, reason)
    runs.end_workflow(ctx, tx, workflow, Status.CANCELED, reason)
